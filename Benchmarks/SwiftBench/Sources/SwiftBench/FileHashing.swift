//===----------------------------------------------------------------------===//
//
// SwiftBench — many small files: hashing every file of a generated tree
// (4,000 files of 1 to 32 KiB, like /usr/include) through path channels
// (`IOChannel(kind:path:)`, read to end of file, handlers on the global
// queue) against FileHandle + DispatchQueue (one blocking read of the
// whole file per task). Both sides compute the same checksum, which is
// checked. One op is one file.
//
//===----------------------------------------------------------------------===//

import Dispatch
import Foundation
import Glibc
import Synchronization
import SwiftQueues

private let hashFiles = 4_000
private let hashDirs = 40

/// FNV-1a over `bytes`, continuing from `hash`.
private func fnv1a(_ hash: UInt64, _ bytes: UnsafeRawBufferPointer) -> UInt64 {
    var h = hash
    for b in bytes {
        h = (h ^ UInt64(b)) &* 0x100_0000_01b3
    }
    return h
}

private let fnvStart: UInt64 = 0xcbf2_9ce4_8422_2325

/// The sum of every file's hash (order-free), per side and round.
private let hashTotal = Atomic<UInt64>(0)

/// Writes the tree under a fresh directory; returns the file paths.
private func makeTree() -> (root: String, paths: [String]) {
    var template = Array("/tmp/sq-swiftbench-files-XXXXXX".utf8CString)
    let root = template.withUnsafeMutableBufferPointer { buf -> String in
        guard mkdtemp(buf.baseAddress!) != nil else { fatalError("mkdtemp failed") }
        return String(cString: buf.baseAddress!)
    }
    var content = [UInt8](repeating: 0, count: 32 * 1024)
    for i in content.indices { content[i] = UInt8(truncatingIfNeeded: i &* 31 &+ 7) }
    for d in 0..<hashDirs { mkdir("\(root)/d\(d)", 0o700) }
    var paths: [String] = []
    for i in 0..<hashFiles {
        let path = "\(root)/d\(i % hashDirs)/f\(i).h"
        let size = 1024 + (i &* 7919) % (31 * 1024)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0, content.withUnsafeBytes({ write(fd, $0.baseAddress, size) }) == size else {
            fatalError("cannot write \(path)")
        }
        close(fd)
        paths.append(path)
    }
    return (root, paths)
}

private func removeTree(_ root: String, _ paths: [String]) {
    for path in paths { unlink(path) }
    for d in 0..<hashDirs { rmdir("\(root)/d\(d)") }
    rmdir(root)
}

/// Hash of one file, from a running hash per channel.
private final class FileHash: @unchecked Sendable {
    var hash = fnvStart  // touched by the channel's handler calls only (serial)
}

func fileHashingRows() -> [Row] {
    let name = "hash \(hashFiles) small files: IOChannel vs FileHandle + DispatchQueue"
    guard selected(name) else { return [] }
    let tree = makeTree()
    defer { removeTree(tree.root, tree.paths) }
    let paths = tree.paths

    let ourGlobal = WorkQueue.global()
    let theirGlobal = DispatchQueue.global()
    var oursTotal: UInt64 = 0
    var theirsTotal: UInt64 = 0
    let row = compare(name, ops: hashFiles, target: 1.0,
        ours: {
            hashTotal.store(0, ordering: .relaxed)
            let group = WorkGroup()
            for path in paths {
                group.enter()
                guard let channel = try? IOChannel(kind: .stream, path: path, flags: O_RDONLY,
                                                   queue: ourGlobal) else {
                    fatalError("cannot open \(path)")
                }
                let state = FileHash()
                channel.read(queue: ourGlobal) { chunk in
                    chunk.data.enumerateRegions { _, _, bytes in
                        state.hash = fnv1a(state.hash, bytes)
                        return true
                    }
                    if chunk.isDone {
                        if chunk.error != nil { fatalError("read failed: \(chunk.error!)") }
                        hashTotal.wrappingAdd(state.hash, ordering: .relaxed)
                        channel.close()
                        group.leave()
                    }
                }
            }
            group.wait()
            oursTotal = hashTotal.load(ordering: .relaxed)
        },
        theirs: {
            hashTotal.store(0, ordering: .relaxed)
            let group = DispatchGroup()
            for path in paths {
                theirGlobal.async(group: group) {
                    guard let handle = FileHandle(forReadingAtPath: path) else {
                        fatalError("cannot open \(path)")
                    }
                    let data = handle.readDataToEndOfFile()
                    handle.closeFile()
                    let hash = data.withUnsafeBytes { fnv1a(fnvStart, $0) }
                    hashTotal.wrappingAdd(hash, ordering: .relaxed)
                }
            }
            group.wait()
            theirsTotal = hashTotal.load(ordering: .relaxed)
        })
    if oursTotal != theirsTotal {
        fatalError("file hashing: checksums differ (\(oursTotal) vs \(theirsTotal))")
    }
    return row.map { [$0] } ?? []
}
