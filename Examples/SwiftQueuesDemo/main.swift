// SwiftQueuesDemo: a short tour of the classic GCD recipes on SwiftQueues,
// then the primitives underneath. Every section waits for its own work with
// a deadline, so the tour ends in a second or two or exits 1 ("timed out").
//
//     swift run -c release SwiftQueuesDemo
//
// Queues.swift: serial queue, group notify, once, asyncAfter, reader-writer.
// Sources.swift: timer, signal, process and file-system sources.
// Primitives.swift: atomic counter, spin lock, lock-free stack/queue, benchmark.

import SwiftQueues

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

do {
    serialQueueRecipe()
    groupNotifyRecipe()
    onceRecipe()
    asyncAfterRecipe()
    timerRecipe()
    try signalRecipe()
    try processRecipe()
    try fileSystemRecipe()
    readerWriterRecipe()
    primitivesTour()
} catch {
    print("source failed: \(error)")
    exit(1)
}
