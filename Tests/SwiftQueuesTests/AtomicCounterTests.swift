import Testing
import SwiftQueues

@Suite struct AtomicCounterTests {
    @Test func startsAtZeroOrTheGivenValue() {
        #expect(AtomicCounter().load() == 0)
        #expect(AtomicCounter(-7).load() == -7)
        #expect(AtomicCounter(.max).load(ordering: .relaxed) == .max)
    }

    @Test(arguments: [AtomicCounter.Ordering.barrier, .relaxed])
    func arithmeticReturnsTheNewValue(ordering: AtomicCounter.Ordering) {
        let counter = AtomicCounter(10)
        #expect(counter.increment(ordering: ordering) == 11)
        #expect(counter.decrement(ordering: ordering) == 10)
        #expect(counter.add(5, ordering: ordering) == 15)
        #expect(counter.add(-20, ordering: ordering) == -5)
        counter.store(42, ordering: ordering)
        #expect(counter.load(ordering: ordering) == 42)
        // Wraps like &+.
        counter.store(.max, ordering: ordering)
        #expect(counter.increment(ordering: ordering) == .min)
    }

    @Test(arguments: [AtomicCounter.Ordering.barrier, .relaxed])
    func compareExchange(ordering: AtomicCounter.Ordering) {
        let counter = AtomicCounter(1)
        #expect(!counter.compareExchange(expected: 0, desired: 9, ordering: ordering))
        #expect(counter.load() == 1)
        #expect(counter.compareExchange(expected: 1, desired: 9, ordering: ordering))
        #expect(counter.load() == 9)
    }

    @Test func fourThreadsOfIncrementsAddUpExactly() {
        let counter = AtomicCounter()
        let relaxed = AtomicCounter()
        onThreads(4) { _ in
            for _ in 0..<100_000 {
                counter.increment()
                relaxed.increment(ordering: .relaxed)
            }
        }
        #expect(counter.load() == 400_000)
        #expect(relaxed.load() == 400_000)
    }

    @Test func incrementsAndDecrementsCancelOut() {
        let counter = AtomicCounter(1_000)
        onThreads(4) { index in
            for _ in 0..<50_000 {
                if index.isMultiple(of: 2) {
                    counter.add(3, ordering: .relaxed)
                } else {
                    counter.add(-3, ordering: .relaxed)
                }
            }
        }
        #expect(counter.load() == 1_000)
    }

    /// The lazy-initialisation pattern: every thread builds a candidate, one
    /// compare-and-swap publishes it, and every loser sees the winner's.
    @Test func compareExchangeLazyInitHasExactlyOneWinner() {
        let threads = 8
        let slot = AtomicCounter()  // 0: not initialised; i + 1: candidate i
        let winners = AtomicCounter()
        let candidates = (0..<threads).map { _ in UnsafeBox("") }
        let seen = (0..<threads).map { _ in UnsafeBox("") }
        let gate = StartGate(parties: threads)
        onThreads(threads) { index in
            candidates[index].value = "candidate \(index)"  // private until published
            gate.arriveAndWait()
            if slot.compareExchange(expected: 0, desired: Int64(index + 1)) {
                winners.increment()
            }
            // Acquire load: the winner's candidate is fully visible.
            seen[index].value = candidates[Int(slot.load()) - 1].value
        }
        #expect(winners.load() == 1)
        let winner = Int(slot.load()) - 1
        #expect((0..<threads).contains(winner))
        #expect(seen.allSatisfy { $0.value == "candidate \(winner)" })
    }

    @Test(arguments: [AtomicCounter.Ordering.barrier, .relaxed])
    func bitwiseOperationsReturnTheNewValue(ordering: AtomicCounter.Ordering) {
        let counter = AtomicCounter(0b1100)
        #expect(counter.or(0b0011, ordering: ordering) == 0b1111)
        #expect(counter.and(0b0110, ordering: ordering) == 0b0110)
        #expect(counter.xor(0b0101, ordering: ordering) == 0b0011)
        // On the bit pattern: all ones is -1.
        #expect(counter.or(-1, ordering: ordering) == -1)
        #expect(counter.and(.max, ordering: ordering) == .max)
        #expect(counter.xor(-1, ordering: ordering) == .min)
    }

    @Test(arguments: [AtomicCounter.Ordering.barrier, .relaxed])
    func testAndSetAndClearReturnTheOldBit(ordering: AtomicCounter.Ordering) {
        let counter = AtomicCounter()
        #expect(counter.testAndSetBit(3, ordering: ordering) == false)
        #expect(counter.testAndSetBit(3, ordering: ordering) == true)
        #expect(counter.load() == 8)
        #expect(counter.testAndSetBit(63, ordering: ordering) == false)
        #expect(counter.load() == .min + 8)
        #expect(counter.testAndClearBit(3, ordering: ordering) == true)
        #expect(counter.testAndClearBit(3, ordering: ordering) == false)
        #expect(counter.testAndClearBit(63, ordering: ordering) == true)
        #expect(counter.load() == 0)
    }

    @Test func concurrentBitOperations() {
        // Four threads set 16 distinct bits each: all 64 end up set.
        let bits = AtomicCounter()
        onThreads(4) { index in
            for bit in (index * 16)..<(index * 16 + 16) {
                #expect(bits.testAndSetBit(bit) == false)
            }
        }
        #expect(bits.load() == -1)

        // Four threads race for one bit: exactly one sees it clear.
        let flag = AtomicCounter()
        let firsts = AtomicCounter()
        let gate = StartGate(parties: 4)
        onThreads(4) { _ in
            gate.arriveAndWait()
            if !flag.testAndSetBit(5) { firsts.increment() }
        }
        #expect(firsts.load() == 1)
        #expect(flag.load() == 32)
    }

    @Test func description() {
        #expect(String(describing: AtomicCounter(12)) == "AtomicCounter(12)")
    }
}
