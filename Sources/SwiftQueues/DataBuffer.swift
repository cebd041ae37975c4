//===----------------------------------------------------------------------===//
//
// SwiftQueues — DataBuffer over the C runtime's sq_data_t
// (include/swiftqueues/data.h): immutable, shared, possibly discontiguous
// bytes. Concatenating, slicing and walking regions never copy a byte; only
// withUnsafeBytes on a buffer of several regions does (sq_data_create_map).
//
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CSwiftQueues
import Synchronization

/// An immutable sequence of bytes that may live in several memory regions
/// (`DispatchData`).
///
///     var response = DataBuffer()
///     response.append(chunk)                // shares chunk's memory
///     let body = response.subdata(in: 257..<response.count)   // no copy
///     let text = String(decoding: body, as: UTF8.self)
///
/// A value type over a reference-counted C object: copies of a
/// `DataBuffer`, its subranges and every concatenation that includes it
/// share the same memory. A buffer handed over with
/// ``init(bytesNoCopy:deallocator:)`` is given back exactly once, when the
/// last of them is gone.
///
/// It is a `RandomAccessCollection` of `UInt8` with `Int` indices from 0
/// (`Array(buffer)`, `buffer[i]`, `buffer.starts(with:)`, ...). Reading a
/// byte is O(1) on a single region and O(log regions) otherwise; a slice
/// (`buffer[a..<b]`) and ``subdata(in:)`` copy nothing.
public struct DataBuffer: Sendable {
    /// Who gives back a buffer handed over without copying.
    public enum Deallocator: Sendable {
        /// The buffer came from `malloc`: `free` it
        /// (`SQ_DATA_DESTRUCTOR_FREE`).
        case free
        /// The buffer came from `mmap`: `munmap` it
        /// (`SQ_DATA_DESTRUCTOR_MUNMAP`).
        case unmap
        /// Run the closure on the queue (nil: the default global queue).
        case custom(WorkQueue?, @Sendable () -> Void)
    }

    /// One region of a buffer: its bytes as a buffer of their own (sharing
    /// the memory) and where they start in the whole.
    public struct Region: Sendable {
        /// Where the region starts in the buffer it was taken from.
        public let offset: Int
        /// The region's bytes: one contiguous region, so its
        /// ``DataBuffer/withUnsafeBytes(_:)`` does not copy.
        public let data: DataBuffer
    }

    /// The C object and what is derived from it.
    internal let storage: DataStorage

    /// The C data object (owned by ``storage``).
    internal var raw: OpaquePointer { storage.raw }

    /// Wraps a C data object, taking over the caller's reference.
    internal init(owning raw: OpaquePointer) {
        self.storage = DataStorage(owning: raw)
    }

    /// Wraps a C data object the caller does not own (it retains it).
    internal init(retaining raw: OpaquePointer) {
        sq_retain(cObject(raw))
        self.storage = DataStorage(owning: raw)
    }

    // MARK: - Creating

    /// An empty buffer (`sq_data_empty`).
    public init() {
        self.storage = DataStorage.empty
    }

    /// A buffer holding a copy of `bytes`.
    public init(bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            self.init()
            return
        }
        self.init(owning: sq_data_create_f(base, bytes.count, nil, nil))
    }

    /// A buffer holding a copy of `bytes` (a `String`'s `utf8`, an array, ...).
    public init(bytes: some Sequence<UInt8>) {
        if let made = bytes.withContiguousStorageIfAvailable({
            DataBuffer(bytes: UnsafeRawBufferPointer($0))
        }) {
            self = made
        } else {
            self = Array(bytes).withUnsafeBytes { DataBuffer(bytes: $0) }
        }
    }

    /// A buffer over `bytes` without copying them: the buffer now owns the
    /// memory, which `deallocator` gives back once the last buffer sharing
    /// it is gone (at once if `bytes` is empty). Do not modify the memory
    /// afterwards.
    ///
    ///     let memory = malloc(size)!
    ///     ...fill it...
    ///     let data = DataBuffer(bytesNoCopy: UnsafeRawBufferPointer(start: memory, count: size))
    public init(bytesNoCopy bytes: UnsafeRawBufferPointer, deallocator: Deallocator = .free) {
        switch deallocator {
        case .free:
            self.init(owning: sq_data_create_f(bytes.baseAddress, bytes.count, nil,
                                               _sq_data_destructor_free))
        case .unmap:
            self.init(owning: sq_data_create_f(bytes.baseAddress, bytes.count, nil,
                                               _sq_data_destructor_munmap))
        case .custom(let queue, let body):
            // One retained box; the C runtime calls the destructor exactly
            // once (also for an empty buffer), which releases it.
            self.init(owning: sq_data_create_with_context_f(
                bytes.baseAddress, bytes.count, queue?.raw, ClosureBox.retained(body),
                runAndReleaseClosureBox))
        }
    }

    /// A buffer with the bytes of a slice of another, sharing its memory.
    public init(_ slice: Slice<DataBuffer>) {
        self = slice.base.subdata(in: slice.startIndex..<slice.endIndex)
    }

    // MARK: - Size

    /// The number of bytes.
    public var count: Int { storage.count }

    /// Whether there are no bytes.
    public var isEmpty: Bool { storage.count == 0 }

    // MARK: - Combining

    /// The bytes of `lhs` followed by those of `rhs`, sharing both
    /// (`sq_data_create_concat`).
    public static func + (lhs: DataBuffer, rhs: DataBuffer) -> DataBuffer {
        if rhs.isEmpty { return lhs }
        if lhs.isEmpty { return rhs }
        return DataBuffer(owning: sq_data_create_concat(lhs.raw, rhs.raw))
    }

    /// Appends the bytes of `other`, sharing them (nothing is copied).
    public mutating func append(_ other: DataBuffer) {
        self = self + other
    }

    /// The bytes in `range`, sharing this buffer's memory
    /// (`sq_data_create_subrange`).
    public func subdata(in range: Range<Int>) -> DataBuffer {
        Swift.precondition(range.lowerBound >= 0 && range.upperBound <= count,
                           "DataBuffer.subdata(in:): \(range) is out of bounds 0..<\(count)")
        if range.count == count { return self }
        if range.isEmpty { return DataBuffer() }
        return DataBuffer(owning: sq_data_create_subrange(raw, range.lowerBound, range.count))
    }

    // MARK: - Regions

    /// The contiguous regions, in order, each with its offset. Nothing is
    /// copied: each region shares this buffer's memory.
    public var regions: [Region] {
        var result: [Region] = []
        storage.walkRegions { region, offset, _ in
            result.append(Region(offset: offset, data: DataBuffer(retaining: region)))
            return true
        }
        return result
    }

    /// Calls `body` for each contiguous region in order, with the region
    /// as a buffer of its own, its offset in the whole and its bytes (valid
    /// during the call only), until `body` returns false
    /// (`sq_data_apply`). Returns false if `body` stopped the walk, true
    /// otherwise (also for an empty buffer, which has no region). An error
    /// thrown by `body` stops the walk and is rethrown.
    ///
    ///     var found: Int?
    ///     buffer.enumerateRegions { _, offset, bytes in
    ///         if let i = bytes.firstIndex(of: 0x0A) { found = offset + i; return false }
    ///         return true
    ///     }
    @discardableResult
    public func enumerateRegions<E: Error>(
        _ body: (_ region: DataBuffer, _ offset: Int, _ bytes: UnsafeRawBufferPointer) throws(E) -> Bool
    ) throws(E) -> Bool {
        var failure: E? = nil
        let finished = storage.walkRegions { region, offset, bytes in
            do throws(E) {
                // A buffer of one region is its own region (the C object
                // itself): no second wrapper for it.
                let data = region == storage.raw ? self : DataBuffer(retaining: region)
                return try body(data, offset, bytes)
            } catch {
                failure = error
                return false
            }
        }
        if let failure { throw failure }
        return finished
    }

    // MARK: - Bytes

    /// Calls `body` with all the bytes in one contiguous buffer, valid
    /// during the call only (`sq_data_create_map`). Copies only when the
    /// buffer has several regions; a single region is lent as it is.
    public func withUnsafeBytes<R, E: Error>(
        _ body: (UnsafeRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        var base: UnsafeRawPointer? = nil
        var size = 0
        let map = sq_data_create_map(raw, &base, &size)
        defer { sq_release(cObject(map)) }
        return try body(UnsafeRawBufferPointer(start: base, count: size))
    }

    /// Copies the bytes in `range` (default: all) to `destination`, as many
    /// as fit, and returns how many were copied.
    @discardableResult
    public func copyBytes(to destination: UnsafeMutableRawBufferPointer, from range: Range<Int>? = nil) -> Int {
        let range = range ?? 0..<count
        Swift.precondition(range.lowerBound >= 0 && range.upperBound <= count,
                           "DataBuffer.copyBytes(to:from:): \(range) is out of bounds 0..<\(count)")
        let total = Swift.min(range.count, destination.count)
        guard total > 0, let target = destination.baseAddress else { return 0 }
        let table = storage.table
        var region = table.region(containing: range.lowerBound)
        var copied = 0
        while copied < total {
            let position = range.lowerBound + copied
            let skip = position - table.starts[region]
            let n = Swift.min(table.counts[region] - skip, total - copied)
            (target + copied).copyMemory(from: table.bases[region] + skip, byteCount: n)
            copied += n
            region += 1
        }
        return copied
    }
}

// MARK: - Collection

extension DataBuffer: RandomAccessCollection {
    public typealias Element = UInt8
    public typealias Index = Int
    public typealias Indices = Range<Int>
    public typealias SubSequence = Slice<DataBuffer>

    /// 0.
    public var startIndex: Int { 0 }

    /// ``count``.
    public var endIndex: Int { storage.count }

    public func index(after i: Int) -> Int { i + 1 }

    public func index(before i: Int) -> Int { i - 1 }

    public func index(_ i: Int, offsetBy distance: Int) -> Int { i + distance }

    public func distance(from start: Int, to end: Int) -> Int { end - start }

    public var indices: Range<Int> { 0..<storage.count }

    /// The byte at `position` (O(1) on one region, O(log regions) on several).
    public subscript(position: Int) -> UInt8 {
        Swift.precondition(position >= 0 && position < storage.count,
                           "DataBuffer index \(position) is out of bounds 0..<\(storage.count)")
        let table = storage.table
        let region = table.region(containing: position)
        return table.bases[region].load(fromByteOffset: position - table.starts[region], as: UInt8.self)
    }

    public subscript(bounds: Range<Int>) -> Slice<DataBuffer> {
        Swift.precondition(bounds.lowerBound >= 0 && bounds.upperBound <= storage.count,
                           "DataBuffer range \(bounds) is out of bounds 0..<\(storage.count)")
        return Slice(base: self, bounds: bounds)
    }

    /// Walks the bytes region by region (no lookup per byte).
    public struct Iterator: IteratorProtocol {
        private let storage: DataStorage
        private let table: RegionTable?
        private var region = 0
        private var position = 0

        fileprivate init(_ storage: DataStorage) {
            self.storage = storage
            self.table = storage.count == 0 ? nil : storage.table
        }

        public mutating func next() -> UInt8? {
            guard let table else { return nil }
            while region < table.counts.count {
                if position < table.counts[region] {
                    let byte = table.bases[region].load(fromByteOffset: position, as: UInt8.self)
                    position += 1
                    return byte
                }
                region += 1
                position = 0
            }
            return nil
        }
    }

    public func makeIterator() -> Iterator {
        Iterator(storage)
    }

    /// Lends the bytes when they are in one region; nil otherwise.
    public func withContiguousStorageIfAvailable<R>(
        _ body: (UnsafeBufferPointer<UInt8>) throws -> R
    ) rethrows -> R? {
        if storage.count == 0 {
            return try body(UnsafeBufferPointer(start: nil, count: 0))
        }
        let table = storage.table
        guard table.counts.count == 1 else { return nil }
        let bytes = UnsafeRawBufferPointer(start: table.bases[0], count: table.counts[0])
        return try bytes.withMemoryRebound(to: UInt8.self) { try body($0) }
    }
}

// MARK: - Equality and description

extension DataBuffer: Equatable {
    /// Whether the bytes are the same, however they are split into regions.
    public static func == (lhs: DataBuffer, rhs: DataBuffer) -> Bool {
        if lhs.raw == rhs.raw { return true }
        guard lhs.count == rhs.count else { return false }
        if lhs.isEmpty { return true }
        let a = lhs.storage.table, b = rhs.storage.table
        var (i, j) = (0, 0)              // regions
        var (skipA, skipB) = (0, 0)      // bytes already compared in them
        var left = lhs.count
        while left > 0 {
            let n = Swift.min(a.counts[i] - skipA, b.counts[j] - skipB)
            let pa = a.bases[i] + skipA, pb = b.bases[j] + skipB
            if pa != pb && memcmp(pa, pb, n) != 0 { return false }
            left -= n
            skipA += n
            skipB += n
            if skipA == a.counts[i] { i += 1; skipA = 0 }
            if skipB == b.counts[j] { j += 1; skipB = 0 }
        }
        return true
    }
}

extension DataBuffer: CustomStringConvertible {
    /// `DataBuffer(351 bytes, 8 regions)`.
    public var description: String {
        let regions = isEmpty ? 0 : storage.table.counts.count
        return "DataBuffer(\(count) bytes, \(regions) region\(regions == 1 ? "" : "s"))"
    }
}

// MARK: - Storage

/// Owns one reference to a C data object; gives it back in `deinit`.
//
// `@unchecked Sendable` is safe: `raw` and `count` are immutable, a C data
// object is immutable and its calls are thread-safe, and the region table
// is published once through an atomic lazy reference.
internal final class DataStorage: @unchecked Sendable {
    /// The C data object (one reference, owned).
    internal let raw: OpaquePointer

    /// `sq_data_get_size` (data objects never change).
    internal let count: Int

    /// Where each region's bytes are: built on first byte access.
    private let lazyTable = AtomicLazyReference<RegionTable>()

    /// The empty buffer's storage, shared by every empty `DataBuffer`
    /// (`sq_data_empty` ignores retain and release).
    internal static let empty = DataStorage(owning: sq_data_create_f(nil, 0, nil, nil))

    internal init(owning raw: OpaquePointer) {
        self.raw = raw
        self.count = sq_data_get_size(raw)
    }

    deinit {
        sq_release(cObject(raw))
    }

    /// The region table (built once; concurrent first callers may both
    /// build one, and all then use the first one stored).
    internal var table: RegionTable {
        if let table = lazyTable.load() { return table }
        var starts: [Int] = [], bases: [UnsafeRawPointer] = [], counts: [Int] = []
        walkRegions { _, offset, bytes in
            starts.append(offset)
            bases.append(bytes.baseAddress.unsafelyUnwrapped)
            counts.append(bytes.count)
            return true
        }
        return lazyTable.storeIfNil(RegionTable(starts: starts, bases: bases, counts: counts))
    }

    /// `sq_data_apply_f` with a non-escaping closure, which gets each
    /// region's C object (valid during the call), offset and bytes.
    @discardableResult
    internal func walkRegions(
        _ body: (OpaquePointer, Int, UnsafeRawBufferPointer) -> Bool
    ) -> Bool {
        withoutActuallyEscaping(body) { body in
            withUnsafePointer(to: body) { slot in
                sq_data_apply_f(raw, UnsafeMutableRawPointer(mutating: slot)) { context, region, offset, buffer, size in
                    context.unsafelyUnwrapped
                        .assumingMemoryBound(to: ((OpaquePointer, Int, UnsafeRawBufferPointer) -> Bool).self)
                        .pointee(region, offset, UnsafeRawBufferPointer(start: buffer, count: size))
                }
            }
        }
    }
}

/// The regions of one data object: start offset, address and size of each,
/// in order.
//
// `@unchecked Sendable` is safe: it is immutable, and the addresses point
// into buffers the data object it was built from keeps alive and never
// modifies (its ``DataStorage`` holds both).
internal final class RegionTable: @unchecked Sendable {
    internal let starts: [Int]
    internal let bases: [UnsafeRawPointer]
    internal let counts: [Int]

    internal init(starts: [Int], bases: [UnsafeRawPointer], counts: [Int]) {
        self.starts = starts
        self.bases = bases
        self.counts = counts
    }

    /// The index of the region holding byte `position` (in bounds).
    internal func region(containing position: Int) -> Int {
        if starts.count == 1 { return 0 }
        var (low, high) = (0, starts.count - 1)
        while low < high {
            let middle = (low + high + 1) / 2
            if starts[middle] <= position {
                low = middle
            } else {
                high = middle - 1
            }
        }
        return low
    }
}
