// The process registry (docs/log-format.md sections 4-6) and what writes
// through it, the crash trailer (1.6) included; one job per header:
//
//   process_registry.h  the registry every copy of the runtime in a process
//                       shares (attached or created once per copy), with the
//                       launch in flight, model instance names, call numbers
//   banner.h            a destination's banner, the start of every header
//                       line and its timestamps
//   sink.h              writing records: one write(2) under the process lock,
//                       the destinations and their descriptors, lost records
//   crash_handler.h     the crash trailer's signal handlers
//
// The runtime's headers include this one for all four.
#pragma once

#include "process_registry.h"
#include "banner.h"
#include "sink.h"
#include "crash_handler.h"
