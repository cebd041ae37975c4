import Foundation
import Testing
import SwiftQueues

/// WorkTrace records a trace file: tasks of a labelled queue appear as
/// slices named by the label, an async's arrow starts at its submission,
/// and the errors are thrown as TraceError. Recording is process-wide, so
/// the tests that record run one at a time.
@Suite(.serialized) struct WorkTraceTests {
    private func temporaryPath(_ name: String) -> String {
        NSTemporaryDirectory() + "sq-worktrace-\(getpid())-\(name).json"
    }

    @Test func recordsLabelledTasksAndTheirArrows() throws {
        // Under SQ_TRACE the process already records: that recording is
        // the one in use, and start must refuse a second.
        if WorkTrace.isRecording {
            #expect(throws: TraceError(errnoCode: EBUSY)) {
                try WorkTrace.start(path: temporaryPath("busy"))
            }
            return
        }
        let path = temporaryPath("labelled")
        defer { unlink(path) }
        try WorkTrace.start(path: path)
        #expect(WorkTrace.isRecording)
        let queue = WorkQueue(label: "com.example.worktrace")
        let group = WorkGroup()
        for _ in 0..<5 {
            queue.async(group: group) {}
        }
        group.wait()
        try WorkTrace.stop()
        #expect(!WorkTrace.isRecording)

        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let root = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let events = try #require(root?["traceEvents"] as? [[String: Any]])
        let slices = events.filter {
            $0["ph"] as? String == "X" && $0["name"] as? String == "com.example.worktrace"
        }
        #expect(slices.count == 5)
        // Each run ends an arrow that a submission started.
        let starts = Set(events.compactMap { event -> String? in
            event["flow_out"] as? Bool == true ? event["bind_id"] as? String : nil
        })
        let ended = slices.compactMap { $0["bind_id"] as? String }
        #expect(ended.count == 5)
        #expect(ended.allSatisfy { starts.contains($0) })
        let threads = events.filter { $0["name"] as? String == "thread_name" }
            .compactMap { ($0["args"] as? [String: Any])?["name"] as? String }
        #expect(threads.contains { $0.hasPrefix("sq.worker") })
    }

    @Test func errorsAreThrown() throws {
        if WorkTrace.isRecording { return }
        #expect(throws: TraceError(errnoCode: EINVAL)) {
            try WorkTrace.stop()
        }
        #expect(throws: TraceError(errnoCode: ENOENT)) {
            try WorkTrace.start(path: "/nonexistent-sq-dir/trace.json")
        }
        #expect(throws: TraceError(errnoCode: EINVAL)) {
            try WorkTrace.start(path: "")
        }
        #expect(!WorkTrace.isRecording)
        #expect(TraceError(errnoCode: EBUSY).description.contains("errno \(EBUSY)"))
    }
}
