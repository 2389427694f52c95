#pragma once
// CUPTI callbacks of the injection library: activity buffers and driver/runtime API calls.
#include <cupti.h>

namespace mhc::record::inject {

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size,
                               size_t valid);
// Enables the API callbacks the recorder uses on `sub`. False (after fail()) on error.
bool enable_callbacks(CUpti_SubscriberHandle sub, bool accesses);
void CUPTIAPI on_api(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                     const void* data);

}  // namespace mhc::record::inject
