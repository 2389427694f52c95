#include "mhc/record/cupti_decode.hpp"

namespace mhc::record {

trace::CopyKind copy_kind(uint8_t kind) {
    switch (kind) {
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return trace::CopyKind::H2D;
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
        case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return trace::CopyKind::D2H;
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return trace::CopyKind::H2H;
        case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return trace::CopyKind::P2P;
        default: return trace::CopyKind::D2D;   // DTOD, ATOA, ATOD, DTOA, unknown
    }
}

namespace {

void decode_kernel(const CUpti_ActivityKernel10& kernel, Translator& translator) {
    KernelEvent event;
    event.name = kernel.name ? kernel.name : "";
    event.start = kernel.start;
    event.end = kernel.end;
    event.device = kernel.deviceId;
    event.stream = kernel.streamId;
    event.correlation = kernel.correlationId;
    event.grid[0] = kernel.gridX, event.grid[1] = kernel.gridY, event.grid[2] = kernel.gridZ;
    event.block[0] = kernel.blockX, event.block[1] = kernel.blockY, event.block[2] = kernel.blockZ;
    event.shared_mem = kernel.staticSharedMemory + kernel.dynamicSharedMemory;
    event.registers = kernel.registersPerThread;
    translator.on_kernel(event);
}

void decode_memory(const CUpti_ActivityMemory4& memory, Translator& translator) {
    switch (memory.memoryKind) {
        case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
        case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: translator.on_host_memory(); return;
        default: break;
    }
    bool pool = memory.memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
    const bool alloc = memory.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    // The pool's size when this allocation or release was made: the only figure of a pool's
    // reserved memory between its MEMORY_POOL records (created, trimmed, destroyed).
    if (memory.memoryPoolConfig.memoryPoolType == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL &&
        (alloc || memory.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)) {
        PoolEvent sample;
        sample.op = PoolEvent::Sampled;
        sample.device = memory.deviceId;
        sample.address = memory.memoryPoolConfig.address;
        sample.size = memory.memoryPoolConfig.pool.size;
        sample.utilized = memory.memoryPoolConfig.utilizedSize;
        sample.t = memory.timestamp;
        sample.bytes = alloc ? memory.bytes : 0;
        translator.on_pool(sample);
    }
    if (alloc) {
        AllocEvent event;
        event.address = memory.address;
        event.bytes = memory.bytes;
        event.t = event.t_enter = memory.timestamp;
        event.device = memory.deviceId;
        event.stream = memory.streamId != CUPTI_INVALID_STREAM_ID ? memory.streamId : 0;   // not async: no stream
        event.source = AllocSource::Activity;
        event.pool = pool;
        event.correlation = memory.correlationId;
        switch (memory.memoryKind) {
            case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: event.api = "memory:managed"; break;
            case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
                event.api = "memory:static";
                event.static_memory = true;
                break;
            case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
                event.api = "memory:managed-static";
                event.static_memory = true;
                break;
            default: event.api = pool ? "memory:pool" : "memory:device"; break;
        }
        translator.on_alloc(event);
    } else if (memory.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
        FreeEvent event;
        event.address = memory.address;
        event.t = memory.timestamp;
        event.device = memory.deviceId;
        event.source = AllocSource::Activity;
        event.correlation = memory.correlationId;
        if (memory.isAsync && memory.streamId != CUPTI_INVALID_STREAM_ID) event.stream = memory.streamId;
        translator.on_free(event);
    }
}

}  // namespace

bool decode_record(const CUpti_Activity* record, Translator& translator) {
    switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
            decode_kernel(*reinterpret_cast<const CUpti_ActivityKernel10*>(record), translator);
            return true;
        case CUPTI_ACTIVITY_KIND_MEMORY2:
            decode_memory(*reinterpret_cast<const CUpti_ActivityMemory4*>(record), translator);
            return true;
        case CUPTI_ACTIVITY_KIND_MEMORY_POOL: {
            const auto& pool_record = *reinterpret_cast<const CUpti_ActivityMemoryPool3*>(record);
            PoolEvent event;
            event.op = static_cast<uint32_t>(pool_record.memoryPoolOperationType);
            event.device = pool_record.deviceId;
            event.address = pool_record.address;
            event.size = pool_record.size;
            event.utilized = pool_record.utilizedSize;
            event.t = pool_record.timestamp;
            event.local = pool_record.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED;
            translator.on_pool(event);
            return true;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const auto& copy_record = *reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
            translator.on_copy({copy_kind(copy_record.copyKind), copy_record.bytes, copy_record.start, copy_record.end,
                                copy_record.deviceId, copy_record.streamId});
            return true;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY2: {
            const auto& copy_record = *reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record);
            translator.on_copy({trace::CopyKind::P2P, copy_record.bytes, copy_record.start, copy_record.end,
                                copy_record.deviceId, copy_record.streamId});
            return true;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            const auto& memset_record = *reinterpret_cast<const CUpti_ActivityMemset4*>(record);
            translator.on_copy({trace::CopyKind::Memset, memset_record.bytes, memset_record.start, memset_record.end,
                                memset_record.deviceId, memset_record.streamId});
            return true;
        }
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
            const auto& sync_record = *reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
            translator.on_sync(
                {static_cast<uint32_t>(sync_record.type), sync_record.start, sync_record.end, sync_record.streamId});
            return true;
        }
        case CUPTI_ACTIVITY_KIND_MARKER: {
            const auto& marker_record = *reinterpret_cast<const CUpti_ActivityMarker2*>(record);
            MarkerEvent event;
            event.id = marker_record.id;
            event.t = marker_record.timestamp;
            event.name = marker_record.name ? marker_record.name : "";
            if (marker_record.flags & CUPTI_ACTIVITY_FLAG_MARKER_END) event.phase = MarkerEvent::Phase::End;
            else if (marker_record.flags & CUPTI_ACTIVITY_FLAG_MARKER_START) event.phase = MarkerEvent::Phase::Start;
            else event.phase = MarkerEvent::Phase::Instant;
            // Sync-object markers (acquire/release) are not ranges of the program.
            if (marker_record.flags &
                (CUPTI_ACTIVITY_FLAG_MARKER_SYNC_ACQUIRE | CUPTI_ACTIVITY_FLAG_MARKER_SYNC_ACQUIRE_SUCCESS |
                 CUPTI_ACTIVITY_FLAG_MARKER_SYNC_ACQUIRE_FAILED | CUPTI_ACTIVITY_FLAG_MARKER_SYNC_RELEASE))
                return true;
            translator.on_marker(event);
            return true;
        }
        case CUPTI_ACTIVITY_KIND_OVERHEAD: {
            const auto& overhead_record = *reinterpret_cast<const CUpti_ActivityOverhead3*>(record);
            translator.on_overhead(
                {static_cast<uint32_t>(overhead_record.overheadKind), overhead_record.start, overhead_record.end});
            return true;
        }
        case CUPTI_ACTIVITY_KIND_DEVICE: {
            const auto& device_record = *reinterpret_cast<const CUpti_ActivityDevice5*>(record);
            translator.on_device({device_record.id, device_record.name ? device_record.name : "",
                                  device_record.globalMemorySize, device_record.computeCapabilityMajor,
                                  device_record.computeCapabilityMinor, device_record.numMultiprocessors});
            return true;
        }
        default: return false;
    }
}

}  // namespace mhc::record
