#pragma once
// CUPTI activity records -> recorder events. Uses the CUPTI headers only (the structs are
// plain C), so it is tested without a GPU and without loading libcupti.
#include <cupti_activity.h>

#include "mhc/record/translator.hpp"

namespace mhc::record {

// Feeds one record to the translator. Returns false for kinds the recorder does not use.
bool decode_record(const CUpti_Activity* record, Translator& translator);

// CUPTI memcpy kind -> trace copy kind (arrays count as device memory).
trace::CopyKind copy_kind(uint8_t cupti_kind);

}  // namespace mhc::record
