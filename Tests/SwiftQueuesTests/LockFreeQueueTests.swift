import Testing
@testable import SwiftQueues
import CSwiftQueues

@Suite struct LockFreeQueueTests {
    @Test func firstInFirstOut() {
        let queue = LockFreeQueue<String>()
        #expect(queue.isEmpty)
        #expect(queue.pop() == nil)
        #expect(queue.push("a") == true)  // was empty
        #expect(queue.push("b") == false)
        queue.push("c")
        #expect(!queue.isEmpty)
        #expect(queue.pop() == "a")
        #expect(queue.pop() == "b")
        queue.push("d")
        #expect(queue.pop() == "c")
        #expect(queue.pop() == "d")
        #expect(queue.pop() == nil)
        #expect(queue.isEmpty)
    }

    @Test func overAlignedAndEmptyElements() {
        let vectors = LockFreeQueue<SIMD8<Double>>()  // 64 bytes, over-aligned
        for i in 0..<10 { vectors.push(SIMD8(repeating: Double(i))) }
        for i in 0..<10 { #expect(vectors.pop() == SIMD8(repeating: Double(i))) }

        let tokens = LockFreeQueue<Void>()  // zero-sized
        tokens.push(())
        #expect(tokens.pop() != nil)
        #expect(tokens.pop() == nil)
    }

    @Test func fourProducersFourConsumersEveryItemOnceInProducerOrder() {
        let queue = LockFreeQueue<Int>()
        let popped = producersAndConsumers(
            producers: 4, consumers: 4, perProducer: 20_000,
            push: { queue.push($0) }, pop: { queue.pop() })
        expectEachItemExactlyOnce(popped, producers: 4, perProducer: 20_000)

        // Pops are serialised, so what one consumer took from one producer
        // must come in the order that producer pushed it.
        for items in popped {
            var last = [Int: Int]()
            for item in items {
                let producer = item >> 32, sequence = item & 0xFFFF_FFFF
                #expect(sequence > last[producer, default: -1])
                last[producer] = sequence
            }
        }
        #expect(queue.isEmpty)
    }

    @Test func popperSeesWhatThePusherWrote() {
        let queue = LockFreeQueue<Parcel>()
        let filled = handOffParcels(count: 2_000, push: { queue.push($0) }, pop: { queue.pop() })
        #expect(filled == 2_000)
    }

    @Test func remainingElementsAreDestroyedWithTheQueue() {
        let live = AtomicCounter()
        do {
            let queue = LockFreeQueue<Tracked>()
            for i in 0..<100 { queue.push(Tracked(i, live: live)) }
            #expect(live.load() == 100)
            for expected in 0..<10 {
                #expect(queue.pop()?.value == expected)
            }
            #expect(live.load() == 90)
        }
        #expect(live.load() == 0)
    }

    @Test func sendableOnlyWithSendableElements() {
        let queue: any Sendable = LockFreeQueue<Int>()
        #expect(queue is LockFreeQueue<Int>)

        final class NotSendable {}
        let local = LockFreeQueue<NotSendable>()  // fine, just not Sendable
        local.push(NotSendable())
        #expect(local.pop() != nil)
    }

    /// sq_fifo_t is importable and keeps head and tail a cache line apart.
    @Test func cStructLayout() {
        #expect(MemoryLayout<sq_fifo_t>.size == 128)
        #expect(MemoryLayout<sq_fifo_t>.offset(of: \sq_fifo_t._sq_tail) == 64)
    }
}
