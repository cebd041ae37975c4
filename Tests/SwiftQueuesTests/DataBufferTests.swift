// DataBuffer at the Swift level: concatenation and subranges that share
// memory (checked by comparing region addresses), stopping a region walk,
// an HTTP response in 8 chunks parsed across chunk boundaries, the
// deallocator running exactly once, and the collection API.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Testing
import SwiftQueues

/// An HTTP response in 8 chunks, as a read handler would receive them.
let httpChunks: [String] = [
    "HTTP/1.1 200 OK\r\nDate: Mon, 23 May 2005 22:38",
    ":34 GMT\r\nServer: Apache/1.3.3.7 (Unix) (Red-H",
    "at/Linux)\r\nLast-Modified: Wed, 08 Jan 2003 23",
    ":11:55 GMT\r\nEtag: \"3f80f-1b6-3e1cb03b\"\r\nCon",
    "tent-Type: text/html; charset=UTF-8\r\nContent-",
    "Length: 131\r\nConnection: close\r\n\r\n<html>\r",
    "\n<head>\r\n  <title>An Example Page</title>\r\n",
    "</head>\r\n<body>\r\n  Hello World, this is a ve",
]

/// The address of a single-region buffer's bytes (lent, not copied).
func baseAddress(of data: DataBuffer) -> UnsafeRawPointer? {
    data.withUnsafeBytes { $0.baseAddress }
}

/// The text of a buffer (UTF-8).
func text(of data: DataBuffer) -> String {
    String(decoding: data, as: UTF8.self)
}

/// Where "\r\n\r\n" starts, found region by region with the match state
/// carried across region boundaries (nothing flattened), and how many
/// regions were visited.
func findHeaderEnd(in data: DataBuffer) -> (offset: Int?, regionsVisited: Int) {
    let pattern = Array("\r\n\r\n".utf8)
    var matched = 0
    var found: Int? = nil
    var visited = 0
    data.enumerateRegions { _, offset, bytes in
        visited += 1
        for (i, byte) in bytes.enumerated() {
            if byte == pattern[matched] {
                matched += 1
            } else {
                matched = byte == pattern[0] ? 1 : 0
            }
            if matched == pattern.count {
                found = offset + i - (pattern.count - 1)
                return false
            }
        }
        return true
    }
    return (found, visited)
}

@Suite struct DataBufferTests {
    /// Concatenation holds both buffers without copying: two regions, (0, 6)
    /// and (6, 5), at the original addresses.
    @Test func concatSharesBothBuffers() {
        let a = DataBuffer(bytes: "Hello ".utf8)
        let b = DataBuffer(bytes: "World".utf8)
        let c = a + b
        #expect(c.count == 11)
        #expect(text(of: c) == "Hello World")

        var log: [(offset: Int, size: Int, base: UnsafeRawPointer?)] = []
        let finished = c.enumerateRegions { _, offset, bytes in
            log.append((offset, bytes.count, bytes.baseAddress))
            return true
        }
        #expect(finished)
        #expect(log.map(\.offset) == [0, 6])
        #expect(log.map(\.size) == [6, 5])
        #expect(log[0].base == baseAddress(of: a))
        #expect(log[1].base == baseAddress(of: b))

        let regions = c.regions
        #expect(regions.map(\.offset) == [0, 6])
        #expect(regions.map(\.data) == [a, b])
        #expect(baseAddress(of: regions[1].data) == baseAddress(of: b))

        var appended = a
        appended.append(b)
        #expect(appended == c)
        #expect(appended.regions.count == 2)
        #expect(c.description == "DataBuffer(11 bytes, 2 regions)")
    }

    /// A buffer of one region walks as one region: the buffer itself (its
    /// bytes, its memory), and a subrange of one region likewise.
    @Test func singleRegionWalkIsTheBuffer() {
        let a = DataBuffer(bytes: "Hello World".utf8)
        var seen: [(region: DataBuffer, offset: Int, base: UnsafeRawPointer?, count: Int)] = []
        let finished = a.enumerateRegions { region, offset, bytes in
            seen.append((region, offset, bytes.baseAddress, bytes.count))
            return true
        }
        #expect(finished)
        #expect(seen.count == 1)
        #expect(seen[0].region == a && seen[0].offset == 0 && seen[0].count == 11)
        #expect(seen[0].base == baseAddress(of: a))
        #expect(baseAddress(of: seen[0].region) == baseAddress(of: a))

        let sub = (a + DataBuffer(bytes: "!".utf8)).subdata(in: 6..<11)
        var regions: [DataBuffer] = []
        sub.enumerateRegions { region, _, _ in
            regions.append(region)
            return true
        }
        #expect(regions.count == 1 && text(of: regions[0]) == "World")
        #expect(baseAddress(of: regions[0]) == baseAddress(of: a).map { $0 + 6 })
    }

    /// A subrange is "lo Wo", in two regions (0, 3) and (3, 2) that point
    /// into the original buffers.
    @Test func subrangeSharesRegions() {
        let a = DataBuffer(bytes: "Hello ".utf8)
        let b = DataBuffer(bytes: "World".utf8)
        let c = a + b
        let sub = c.subdata(in: 3..<8)
        #expect(text(of: sub) == "lo Wo")
        let regions = sub.regions
        #expect(regions.map(\.offset) == [0, 3])
        #expect(regions.map(\.data.count) == [3, 2])
        #expect(baseAddress(of: regions[0].data) == baseAddress(of: a).map { $0 + 3 })
        #expect(baseAddress(of: regions[1].data) == baseAddress(of: b))

        // A slice shares too, and converts back without copying.
        let slice = c[3..<8]
        #expect(slice.startIndex == 3 && Array(slice) == Array("lo Wo".utf8))
        let fromSlice = DataBuffer(slice)
        #expect(fromSlice == sub)
        #expect(baseAddress(of: fromSlice.regions[1].data) == baseAddress(of: b))

        // Whole and empty ranges.
        #expect(c.subdata(in: 0..<11) == c)
        #expect(c.subdata(in: 4..<4).isEmpty)
        #expect(c.subdata(in: 6..<11) == b)
    }

    /// A walk that returns false after the first region stops there and
    /// reports false; a thrown error stops it and is rethrown.
    @Test func regionWalkStopsEarly() throws {
        let c = DataBuffer(bytes: "Hello ".utf8) + DataBuffer(bytes: "World".utf8)
            + DataBuffer(bytes: "!".utf8)
        var calls = 0
        let finished = c.enumerateRegions { _, _, _ in
            calls += 1
            return false
        }
        #expect(!finished)
        #expect(calls == 1)

        calls = 0
        #expect(throws: TestError(code: 7)) {
            try c.enumerateRegions { _, offset, _ throws(TestError) in
                calls += 1
                if offset > 0 { throw TestError(code: 7) }
                return true
            }
        }
        #expect(calls == 2)

        #expect(DataBuffer().enumerateRegions { _, _, _ in Issue.record("no region"); return true })
    }

    /// The 8 HTTP chunks concatenated one by one: 351 bytes in 8 regions; the
    /// header ends at 253 (found in region 6 without flattening); the header
    /// says Content-Length 131; the body starts with "<html>" at 257, inside
    /// chunk 5's own buffer.
    @Test func httpChunksParseAcrossRegions() {
        var response = DataBuffer()
        var chunks: [DataBuffer] = []
        for chunk in httpChunks {
            let data = DataBuffer(bytes: chunk.utf8)
            chunks.append(data)
            response.append(data)
        }
        #expect(chunks.map(\.count) == [45, 45, 45, 43, 45, 41, 43, 44])
        #expect(response.count == 351)
        #expect(response.regions.map(\.offset) == [0, 45, 90, 135, 178, 223, 264, 307])

        let (headerEnd, visited) = findHeaderEnd(in: response)
        #expect(headerEnd == 253)
        #expect(visited == 6)   // stopped in chunk 5

        let header = text(of: response.subdata(in: 0..<253))
        let lines = header.split(separator: "\r\n", omittingEmptySubsequences: false)
        #expect(lines.count == 8)
        #expect(lines.contains("Content-Length: 131"))
        #expect(lines.contains("Connection: close"))
        let length = lines.first { $0.hasPrefix("Content-Length: ") }
            .flatMap { Int($0.dropFirst("Content-Length: ".count)) }
        #expect(length == 131)
        // Values split across chunk boundaries read whole.
        #expect(header.contains("22:38:34") && header.contains("Red-Hat"))
        #expect(header.contains("23:11:55") && header.contains("Content-Type"))

        let body = response.subdata(in: 257..<response.count)
        #expect(body.count == 94)
        #expect(body.starts(with: "<html>".utf8))
        let first = body.regions[0]
        #expect(first.offset == 0)
        #expect(baseAddress(of: first.data) == baseAddress(of: chunks[5]).map { $0 + (257 - 223) })

        // Byte access across regions agrees with the text.
        let flat = Array(httpChunks.joined().utf8)
        #expect(Array(response) == flat)
        #expect(response[253] == 0x0D && response[256] == 0x0A && response[257] == UInt8(ascii: "<"))
        #expect(response == DataBuffer(bytes: flat))
    }

    /// A buffer handed over with a custom deallocator is given back exactly
    /// once, on the given queue, only after the original, its subranges,
    /// slices and concatenations are all gone.
    @Test func deallocatorRunsOnceAfterEverySharer() {
        let size = 4096
        let memory = malloc(size)!
        memset(memory, 0x5A, size)
        let queue = WorkQueue(label: "test.data.destructor")
        let runs = AtomicCounter()
        let onQueue = AtomicCounter()
        let released = CountingSemaphore(value: 0)
        let address = UInt(bitPattern: memory)
        var original: DataBuffer? = DataBuffer(
            bytesNoCopy: UnsafeRawBufferPointer(start: memory, count: size),
            deallocator: .custom(queue) {
                runs.increment()
                if WorkQueue.currentLabel == "test.data.destructor" { onQueue.increment() }
                free(UnsafeMutableRawPointer(bitPattern: address))
                released.signal()
            })
        #expect(baseAddress(of: original!) == UnsafeRawPointer(memory))   // not copied

        var sharers: [DataBuffer] = []
        sharers.append(original!.subdata(in: 100..<200))
        sharers.append(DataBuffer(bytes: "prefix".utf8) + original!)
        sharers.append(DataBuffer(original![1000..<1001]))
        sharers.append(sharers[1].subdata(in: 3..<4100))
        var copy: DataBuffer? = original

        original = nil
        copy = nil
        sleepMilliseconds(50)
        #expect(runs.load() == 0, "the deallocator ran while the buffer was shared")
        #expect(sharers[3].count == 4097 && sharers[0].allSatisfy { $0 == 0x5A })

        sharers.removeLast(2)
        sleepMilliseconds(20)
        #expect(runs.load() == 0)
        sharers.removeAll()
        #expect(released.wait(timeout: .now() + rendezvousTimeout) == .success)
        sleepMilliseconds(50)
        #expect(runs.load() == 1)
        #expect(onQueue.load() == 1)
        _ = copy
    }

    /// The same for `.free` and for empty buffers: a malloc'ed buffer is
    /// taken over without copying; an empty one's deallocator runs at once.
    @Test func freeDeallocatorAndEmptyBuffers() {
        let memory = malloc(16)!
        memcpy(memory, "0123456789abcdef", 16)
        let data = DataBuffer(bytesNoCopy: UnsafeRawBufferPointer(start: memory, count: 16))
        #expect(baseAddress(of: data) == UnsafeRawPointer(memory))
        #expect(text(of: data) == "0123456789abcdef")

        let ran = CountingSemaphore(value: 0)
        let empty = DataBuffer(bytesNoCopy: UnsafeRawBufferPointer(start: nil, count: 0),
                               deallocator: .custom(nil) { ran.signal() })
        #expect(empty.isEmpty)
        #expect(ran.wait(timeout: .now() + rendezvousTimeout) == .success)

        let none = DataBuffer()
        #expect(none.isEmpty && none.count == 0 && none.regions.isEmpty)
        #expect(none == DataBuffer(bytes: [UInt8]()))
        #expect(Array(none) == [])
        #expect(none.withUnsafeBytes { $0.count } == 0)
        #expect(none + data == data && data + none == data)
        #expect(none.description == "DataBuffer(0 bytes, 0 regions)")
    }

    /// The collection API: indices from 0, element access and iteration
    /// across regions, backwards, Array conversion, equality by content
    /// whatever the region split.
    @Test func collectionAcrossRegions() {
        let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var split = DataBuffer()
        var start = 0
        for size in [1, 10, 100, 389, 500] {
            split.append(DataBuffer(bytes: bytes[start..<start + size]))
            start += size
        }
        let whole = DataBuffer(bytes: bytes)
        #expect(split.regions.count == 5)
        #expect(whole.regions.count == 1)
        #expect(split.count == 1000 && split.startIndex == 0 && split.endIndex == 1000)
        #expect(split.indices == 0..<1000)
        #expect(Array(split) == bytes)
        #expect(Array(split.reversed()) == Array(bytes.reversed()))
        for i in [0, 1, 10, 11, 110, 111, 498, 499, 500, 999] {
            #expect(split[i] == bytes[i], "byte \(i)")
        }
        #expect(split == whole)
        #expect(split != whole.subdata(in: 0..<999))
        var changed = bytes
        changed[600] ^= 1
        #expect(split != DataBuffer(bytes: changed))
        #expect(split.firstIndex(of: bytes[777]) == bytes.firstIndex(of: bytes[777]))
        #expect(split.withContiguousStorageIfAvailable { _ in 0 } == nil)
        #expect(whole.withContiguousStorageIfAvailable { Array($0) } == bytes)
        #expect(Array(split[5..<15]) == Array(bytes[5..<15]))
        #expect(split.map { $0 } == bytes)   // lazily built region table
    }

    /// withUnsafeBytes lends a single region as it is and flattens several
    /// into a copy; copyBytes copies any range, clipped to the destination.
    @Test func contiguousViewsAndCopies() {
        let a = DataBuffer(bytes: "Hello ".utf8)
        let c = a + DataBuffer(bytes: "World".utf8)
        var regionBase: UnsafeRawPointer? = nil
        a.enumerateRegions { _, _, bytes in regionBase = bytes.baseAddress; return true }
        #expect(baseAddress(of: a) == regionBase)   // one region: lent as it is
        let flatBase = baseAddress(of: c)
        #expect(flatBase != nil && flatBase != baseAddress(of: a))
        #expect(c.withUnsafeBytes { Array($0) } == Array("Hello World".utf8))
        #expect(throws: TestError(code: 1)) {
            try c.withUnsafeBytes { _ throws(TestError) in throw TestError(code: 1) }
        }

        var out = [UInt8](repeating: 0, count: 11)
        #expect(out.withUnsafeMutableBytes { c.copyBytes(to: $0) } == 11)
        #expect(out == Array("Hello World".utf8))
        var small = [UInt8](repeating: 0, count: 4)
        #expect(small.withUnsafeMutableBytes { c.copyBytes(to: $0, from: 4..<9) } == 4)
        #expect(small == Array("o Wo".utf8))
        var large = [UInt8](repeating: 0, count: 20)
        #expect(large.withUnsafeMutableBytes { c.copyBytes(to: $0, from: 5..<11) } == 6)
        #expect(Array(large.prefix(6)) == Array(" World".utf8))
    }

    /// Creating from sequences: contiguous or not, the bytes are copied.
    @Test func initFromSequences() {
        var array: [UInt8] = [1, 2, 3]
        let data = DataBuffer(bytes: array)
        array[0] = 9
        #expect(Array(data) == [1, 2, 3])
        let generated = DataBuffer(bytes: (0..<300).lazy.map { UInt8(truncatingIfNeeded: $0) })
        #expect(generated.count == 300 && generated[299] == 43)
        let raw = array.withUnsafeBytes { DataBuffer(bytes: $0) }
        #expect(Array(raw) == [9, 2, 3])
    }

    /// A buffer shared by several threads: values are Sendable, the lazily
    /// built region table is published safely.
    @Test func sharedAcrossThreads() {
        var data = DataBuffer()
        for i in 0..<64 {
            data.append(DataBuffer(bytes: [UInt8](repeating: UInt8(i), count: 100)))
        }
        let shared = data
        let sums = AtomicCounter()
        let gate = StartGate(parties: 4)
        onThreads(4) { _ in
            gate.arriveAndWait()
            var sum = 0
            for i in stride(from: 0, to: shared.count, by: 7) { sum += Int(shared[i]) }
            let tail = shared.subdata(in: 3200..<6400)
            sum += tail.reduce(0) { $0 + Int($1) }
            sums.add(Int64(sum))
        }
        var expected = 0
        for i in stride(from: 0, to: 6400, by: 7) { expected += i / 100 }
        for i in 3200..<6400 { expected += i / 100 }
        #expect(sums.load() == Int64(4 * expected))
    }
}
