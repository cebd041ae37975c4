//===----------------------------------------------------------------------===//
//
// SwiftQueues — AtomicCounter: a 64-bit atomic integer over the C runtime's
// sq_atomic_* operations (include/swiftqueues/atomic.h).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues

/// A 64-bit integer that any number of threads may read and modify at once.
///
/// Every operation is one call to the C runtime's inline `sq_atomic_*`
/// functions: an increment is one locked instruction. Each operation takes an
/// `ordering:`; the default, ``Ordering/barrier``, is a full memory barrier
/// (use it when the counter publishes or guards other memory: reference
/// counts, "done" flags, lazy initialisation); ``Ordering/relaxed`` is atomic
/// but orders nothing else (statistics counters whose value alone matters).
///
///     let hits = AtomicCounter()
///     hits.increment(ordering: .relaxed)
///     print(hits.load())
///
/// `increment`, `decrement`, `add`, `or`, `and` and `xor` return the **new**
/// value; `testAndSetBit` and `testAndClearBit` return the bit's **old** value.
/// The bitwise operations work on the two's-complement bit pattern.
//
// `@unchecked Sendable` is safe: the only state is `storage`, an immutable
// pointer to a heap-allocated Int64 that is initialised before `init` returns
// (before the counter can be shared) and afterwards only ever read or written
// through the C atomics, so no access can race. It is freed in `deinit`, when
// no other reference exists.
public final class AtomicCounter: @unchecked Sendable {
    /// The memory ordering of one atomic operation.
    public enum Ordering: Sendable, Hashable {
        /// Sequentially consistent read-modify-writes, acquire loads, release
        /// stores (the C runtime's plain `sq_atomic_*` forms).
        case barrier
        /// Atomic, but orders no other memory access (the `_relaxed` forms).
        case relaxed
    }

    /// A cache line of its own (64 bytes, 64-aligned), so that two counters
    /// hammered by different threads never share one (no false sharing).
    @usableFromInline
    internal let storage: UnsafeMutablePointer<Int64>

    private static var cacheLine: Int { 64 }

    /// Creates a counter holding `value`.
    public init(_ value: Int64 = 0) {
        let raw = UnsafeMutableRawPointer.allocate(
            byteCount: Self.cacheLine, alignment: Self.cacheLine)
        self.storage = raw.initializeMemory(as: Int64.self, repeating: value, count: 1)
    }

    deinit {
        storage.deinitialize(count: 1)
        UnsafeMutableRawPointer(storage).deallocate()
    }

    /// The same storage seen as UInt64 for the bitwise operations (signed and
    /// unsigned variants of an integer type may alias, in Swift as in C).
    @inlinable
    internal var _bits: UnsafeMutablePointer<UInt64> {
        UnsafeMutableRawPointer(storage).assumingMemoryBound(to: UInt64.self)
    }

    // MARK: - Loads and stores

    /// Reads the value (acquire; `.relaxed`: no ordering).
    @inlinable
    public func load(ordering: Ordering = .barrier) -> Int64 {
        switch ordering {
        case .barrier: return sq_atomic_load64(storage)
        case .relaxed: return sq_atomic_load64_relaxed(storage)
        }
    }

    /// Writes `value` (release; `.relaxed`: no ordering).
    @inlinable
    public func store(_ value: Int64, ordering: Ordering = .barrier) {
        switch ordering {
        case .barrier: sq_atomic_store64(storage, value)
        case .relaxed: sq_atomic_store64_relaxed(storage, value)
        }
    }

    // MARK: - Arithmetic

    /// Adds one and returns the new value. Wraps on overflow.
    @inlinable
    @discardableResult
    public func increment(ordering: Ordering = .barrier) -> Int64 {
        switch ordering {
        case .barrier: return sq_atomic_inc64(storage)
        case .relaxed: return sq_atomic_inc64_relaxed(storage)
        }
    }

    /// Subtracts one and returns the new value. Wraps on overflow.
    @inlinable
    @discardableResult
    public func decrement(ordering: Ordering = .barrier) -> Int64 {
        switch ordering {
        case .barrier: return sq_atomic_dec64(storage)
        case .relaxed: return sq_atomic_dec64_relaxed(storage)
        }
    }

    /// Adds `delta` (which may be negative) and returns the new value.
    /// Wraps on overflow.
    @inlinable
    @discardableResult
    public func add(_ delta: Int64, ordering: Ordering = .barrier) -> Int64 {
        switch ordering {
        case .barrier: return sq_atomic_add64(storage, delta)
        case .relaxed: return sq_atomic_add64_relaxed(storage, delta)
        }
    }

    /// Replaces the value with `desired` if it equals `expected`; returns
    /// whether it did. With `.barrier` the operation is sequentially
    /// consistent whether it succeeds or fails, so a thread that loses a
    /// lazy-initialisation race sees the winner's writes.
    @inlinable
    public func compareExchange(
        expected: Int64, desired: Int64, ordering: Ordering = .barrier
    ) -> Bool {
        switch ordering {
        case .barrier: return sq_atomic_cas64(storage, expected, desired)
        case .relaxed: return sq_atomic_cas64_relaxed(storage, expected, desired)
        }
    }

    // MARK: - Bitwise operations

    /// ORs `mask` into the value and returns the new value.
    @inlinable
    @discardableResult
    public func or(_ mask: Int64, ordering: Ordering = .barrier) -> Int64 {
        let m = UInt64(bitPattern: mask)
        switch ordering {
        case .barrier: return Int64(bitPattern: sq_atomic_or64(_bits, m))
        case .relaxed: return Int64(bitPattern: sq_atomic_or64_relaxed(_bits, m))
        }
    }

    /// ANDs `mask` into the value and returns the new value.
    @inlinable
    @discardableResult
    public func and(_ mask: Int64, ordering: Ordering = .barrier) -> Int64 {
        let m = UInt64(bitPattern: mask)
        switch ordering {
        case .barrier: return Int64(bitPattern: sq_atomic_and64(_bits, m))
        case .relaxed: return Int64(bitPattern: sq_atomic_and64_relaxed(_bits, m))
        }
    }

    /// XORs `mask` into the value and returns the new value.
    @inlinable
    @discardableResult
    public func xor(_ mask: Int64, ordering: Ordering = .barrier) -> Int64 {
        let m = UInt64(bitPattern: mask)
        switch ordering {
        case .barrier: return Int64(bitPattern: sq_atomic_xor64(_bits, m))
        case .relaxed: return Int64(bitPattern: sq_atomic_xor64_relaxed(_bits, m))
        }
    }

    /// Sets bit `bit` (0 is the least significant, 63 the sign bit) and
    /// returns whether it was already set.
    @inlinable
    @discardableResult
    public func testAndSetBit(_ bit: Int, ordering: Ordering = .barrier) -> Bool {
        if !(0..<64).contains(bit) { misuse("AtomicCounter.testAndSetBit", "bit \(bit) is out of range 0..<64") }
        switch ordering {
        case .barrier: return sq_atomic_test_and_set_bit64(_bits, UInt32(bit))
        case .relaxed: return sq_atomic_test_and_set_bit64_relaxed(_bits, UInt32(bit))
        }
    }

    /// Clears bit `bit` (0 is the least significant, 63 the sign bit) and
    /// returns whether it was set.
    @inlinable
    @discardableResult
    public func testAndClearBit(_ bit: Int, ordering: Ordering = .barrier) -> Bool {
        if !(0..<64).contains(bit) { misuse("AtomicCounter.testAndClearBit", "bit \(bit) is out of range 0..<64") }
        switch ordering {
        case .barrier: return sq_atomic_test_and_clear_bit64(_bits, UInt32(bit))
        case .relaxed: return sq_atomic_test_and_clear_bit64_relaxed(_bits, UInt32(bit))
        }
    }
}

extension AtomicCounter: CustomStringConvertible {
    public var description: String { "AtomicCounter(\(load()))" }
}
