// RuntimeSnapshot: the C runtime's snapshot as a Codable Swift value.

import Foundation
import Testing
import SwiftQueues

@Suite struct RuntimeSnapshotTests {
    /// A suspended queue with work in it, a busy one, a source and a
    /// channel show with their figures.
    @Test func showsQueuesSourcesAndChannels() throws {
        let held = WorkQueue(label: "com.example.swift.snapshot.held")
        held.suspend()
        for _ in 0..<3 { held.async {} }
        let busy = WorkQueue(label: "com.example.swift.snapshot.busy")
        let gate = CountingSemaphore(value: 0)
        let started = CountingSemaphore(value: 0)
        busy.async { started.signal(); gate.wait() }
        busy.async {}
        started.wait()
        let timer = TimerSource(queue: held)
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let channel = IOChannel(kind: .stream, fileDescriptor: fds[1])

        let snapshot = RuntimeSnapshot.capture()
        #expect(snapshot.processID == getpid())
        #expect(snapshot.pool.width >= 1)
        #expect(snapshot.queues.first?.kind == .main)
        #expect(snapshot.queues.contains { $0.kind == .global && $0.running == nil })
        let heldInfo = try #require(snapshot.queues.first { $0.label == "com.example.swift.snapshot.held" })
        #expect(heldInfo.kind == .serial)
        #expect(heldInfo.suspendCount == 1)
        #expect(heldInfo.queued == 3)
        #expect(heldInfo.running == 0)
        #expect(heldInfo.target == "com.swiftqueues.root.default")
        #expect(heldInfo.waitingMilliseconds != nil)
        let busyInfo = try #require(snapshot.queues.first { $0.label == "com.example.swift.snapshot.busy" })
        #expect(busyInfo.queued == 1)
        #expect(busyInfo.running == 1)
        #expect(snapshot.sources.contains {
            $0.type == "timer" && $0.target == "com.example.swift.snapshot.held" && $0.isInactive
        })
        #expect(snapshot.channels.contains {
            $0.type == "stream" && $0.fileDescriptor == fds[1] && $0.path == nil && !$0.isClosed
        })

        gate.signal()
        held.resume()
        held.sync {}
        busy.sync {}
        channel.close(stop: true)
        close(fds[0])
        timer.cancel()
        timer.activate()
    }

    /// Encodes with JSONEncoder and decodes back to the same value; the
    /// JSON has every field, optional ones as null.
    @Test func roundTripsThroughJSON() throws {
        let queue = WorkQueue(label: "com.example.swift.snapshot.codable")
        queue.suspend()
        queue.async {}
        let snapshot = RuntimeSnapshot.capture()
        queue.resume()
        queue.sync {}

        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(snapshot)
        let decoded = try JSONDecoder().decode(RuntimeSnapshot.self, from: data)
        #expect(decoded == snapshot)

        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        for key in ["processID", "time", "pool", "queues", "sources", "channels", "threads"] {
            #expect(object[key] != nil, "missing \(key)")
        }
        let queues = try #require(object["queues"] as? [[String: Any]])
        let mine = try #require(queues.first { $0["label"] as? String == "com.example.swift.snapshot.codable" })
        #expect(mine["queued"] as? Int == 1)
        #expect(mine["suspendCount"] as? Int == 1)
        #expect(mine["kind"] as? String == "serial")
        let pool = try #require(object["pool"] as? [String: Any])
        for key in ["width", "maxThreads", "live", "idle", "searching", "jobs", "netFirings", "localJobs"] {
            #expect(pool[key] != nil, "missing pool.\(key)")
        }
    }

    /// The text and the C runtime's own JSON.
    @Test func textAndJSON() throws {
        let queue = WorkQueue(label: "com.example.swift.snapshot.text")
        queue.suspend()
        queue.async {}
        let text = RuntimeSnapshot.text()
        let json = RuntimeSnapshot.json()
        queue.resume()
        queue.sync {}
        #expect(text.hasPrefix("SwiftQueues: snapshot of process "))
        #expect(text.contains("  queue 'com.example.swift.snapshot.text' (serial, target 'com.swiftqueues.root.default'): suspended 1, queued 1, running 0"))
        #expect(text.hasSuffix("SwiftQueues: end of snapshot\n"))
        let parsed = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        #expect(parsed?["pid"] as? Int == Int(getpid()))
        #expect(json.contains("\"label\":\"com.example.swift.snapshot.text\""))
    }
}
