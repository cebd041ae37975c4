#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Testing
import SwiftQueues

/// An element that counts live instances, to check nothing leaks.
final class Tracked: Sendable {
    let value: Int
    let live: AtomicCounter

    init(_ value: Int, live: AtomicCounter) {
        self.value = value
        self.live = live
        live.increment()
    }

    deinit { live.decrement() }
}

/// A mutable element with no synchronisation of its own: the container's
/// hand-off must publish its contents (checked under ThreadSanitizer).
final class Parcel: @unchecked Sendable {
    var contents = 0
}

/// One thread pushes `count` parcels, each filled in just before its push;
/// another pops them and reads and rewrites their contents. Returns how many
/// the popper found filled in.
func handOffParcels(
    count: Int, push: @escaping @Sendable (Parcel) -> Void, pop: @escaping @Sendable () -> Parcel?
) -> Int {
    let filled = AtomicCounter()
    onThreads(2) { index in
        if index == 0 {
            for n in 1...count {
                let parcel = Parcel()
                parcel.contents = n
                push(parcel)
            }
        } else {
            var popped = 0
            while popped < count {
                guard let parcel = pop() else { sched_yield(); continue }
                popped += 1
                if parcel.contents > 0 { filled.increment(ordering: .relaxed) }
                parcel.contents = 0
            }
        }
    }
    return Int(filled.load())
}

/// Runs `producers` threads that each push `perProducer` values
/// (`producer << 32 | sequence`) and `consumers` threads that pop until all
/// have been taken; returns what each consumer popped, in its popping order.
func producersAndConsumers(
    producers: Int, consumers: Int, perProducer: Int,
    push: @escaping @Sendable (Int) -> Void, pop: @escaping @Sendable () -> Int?
) -> [[Int]] {
    let total = Int64(producers * perProducer)
    let taken = AtomicCounter()
    let results = (0..<consumers).map { _ in UnsafeBox([Int]()) }
    let gate = StartGate(parties: producers + consumers)
    onThreads(producers + consumers) { index in
        gate.arriveAndWait()
        if index < producers {
            for sequence in 0..<perProducer {
                push(index << 32 | sequence)
            }
        } else {
            let mine = results[index - producers]
            mine.value.reserveCapacity(Int(total))
            while taken.load(ordering: .relaxed) < total {
                if let item = pop() {
                    taken.increment(ordering: .relaxed)
                    mine.value.append(item)
                } else {
                    sched_yield()
                }
            }
        }
    }
    return results.map(\.value)
}

/// Every pushed item was popped exactly once.
func expectEachItemExactlyOnce(_ popped: [[Int]], producers: Int, perProducer: Int) {
    let all = popped.flatMap { $0 }.sorted()
    let expected = (0..<producers).flatMap { p in (0..<perProducer).map { p << 32 | $0 } }
    #expect(all.count == expected.count)
    #expect(all == expected)
}

@Suite struct LockFreeStackTests {
    @Test func lastInFirstOut() {
        let stack = LockFreeStack<String>()
        #expect(stack.isEmpty)
        #expect(stack.pop() == nil)
        #expect(stack.push("a") == true)  // was empty
        #expect(stack.push("b") == false)
        stack.push("c")
        #expect(!stack.isEmpty)
        #expect(stack.pop() == "c")
        #expect(stack.pop() == "b")
        #expect(stack.pop() == "a")
        #expect(stack.pop() == nil)
        #expect(stack.isEmpty)
    }

    @Test func overAlignedAndEmptyElements() {
        let vectors = LockFreeStack<SIMD8<Double>>()  // 64 bytes, over-aligned
        for i in 0..<10 { vectors.push(SIMD8(repeating: Double(i))) }
        for i in (0..<10).reversed() { #expect(vectors.pop() == SIMD8(repeating: Double(i))) }

        let tokens = LockFreeStack<Void>()  // zero-sized
        tokens.push(())
        tokens.push(())
        #expect(tokens.pop() != nil)
        #expect(tokens.pop() != nil)
        #expect(tokens.pop() == nil)
    }

    @Test func fourProducersFourConsumersEveryItemExactlyOnce() {
        let stack = LockFreeStack<Int>()
        let popped = producersAndConsumers(
            producers: 4, consumers: 4, perProducer: 20_000,
            push: { stack.push($0) }, pop: { stack.pop() })
        expectEachItemExactlyOnce(popped, producers: 4, perProducer: 20_000)
        #expect(stack.isEmpty)
    }

    @Test func popperSeesWhatThePusherWrote() {
        let stack = LockFreeStack<Parcel>()
        let filled = handOffParcels(count: 2_000, push: { stack.push($0) }, pop: { stack.pop() })
        #expect(filled == 2_000)
    }

    @Test func remainingElementsAreDestroyedWithTheStack() {
        let live = AtomicCounter()
        do {
            let stack = LockFreeStack<Tracked>()
            for i in 0..<100 { stack.push(Tracked(i, live: live)) }
            #expect(live.load() == 100)
            for expected in stride(from: 99, through: 90, by: -1) {
                #expect(stack.pop()?.value == expected)
            }
            #expect(live.load() == 90)
        }
        #expect(live.load() == 0)
    }

    @Test func sendableOnlyWithSendableElements() {
        let stack: any Sendable = LockFreeStack<Int>()
        #expect(stack is LockFreeStack<Int>)

        final class NotSendable {}
        let local = LockFreeStack<NotSendable>()  // fine, just not Sendable
        local.push(NotSendable())
        #expect(local.pop() != nil)
    }
}
