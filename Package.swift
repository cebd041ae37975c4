// swift-tools-version:6.0
//
// SwiftQueues: Grand Central Dispatch rebuilt for Linux.
// CSwiftQueues (folder Sources/CRuntime) is the C core (also built as libswiftqueues by the Makefile);
// SwiftQueues is the Swift API over it.
import PackageDescription

let package = Package(
    name: "SwiftQueues",
    products: [
        .library(name: "SwiftQueues", targets: ["SwiftQueues"]),
        .library(name: "CSwiftQueues", targets: ["CSwiftQueues"]),
    ],
    targets: [
        .target(
            name: "CSwiftQueues",
            path: "Sources/CRuntime",
            cSettings: [
                .define("_GNU_SOURCE"),
            ],
            linkerSettings: [
                // Debian: libevent-dev, liburcu-dev (`make deps` installs them).
                .linkedLibrary("event_core"),
                .linkedLibrary("event_pthreads"),
                .linkedLibrary("urcu-cds"),
                .linkedLibrary("urcu-common"),
                .linkedLibrary("pthread"),
            ]
        ),
        .target(
            name: "SwiftQueues",
            dependencies: ["CSwiftQueues"],
            path: "Sources/SwiftQueues"
        ),
        .executableTarget(
            name: "SwiftQueuesDemo",
            dependencies: ["SwiftQueues"],
            path: "Examples/SwiftQueuesDemo"
        ),
        // A program the tests start: swift test bodies never run on the
        // process's main thread, so the main queue is checked from here.
        .executableTarget(
            name: "MainQueueChecks",
            dependencies: ["SwiftQueues"],
            path: "Tests/MainQueueChecks"
        ),
        // Programs the global-executor tests start: installing the executor
        // is once per process, and main-actor checks need the main thread.
        .executableTarget(
            name: "ExecutorChecks",
            dependencies: ["SwiftQueues"],
            path: "Tests/ExecutorChecks"
        ),
        .executableTarget(
            name: "ExecutorAsyncMain",
            dependencies: ["SwiftQueues"],
            path: "Tests/ExecutorAsyncMain"
        ),
        .executableTarget(
            name: "ExecutorAppMain",
            dependencies: ["SwiftQueues"],
            path: "Tests/ExecutorAppMain"
        ),
        // Liveness shapes (work queued behind blocked or computing threads),
        // one per run: LivenessTests start it as a child with a deadline,
        // so a hang fails the test instead of hanging the run.
        .executableTarget(
            name: "LivenessChecks",
            dependencies: ["SwiftQueues"],
            path: "Tests/LivenessChecks"
        ),
        // Misuse of the Swift API, one case per run: the tests check each
        // message, also from a release build (`make test` builds it so).
        .executableTarget(
            name: "MisuseChecks",
            dependencies: ["SwiftQueues"],
            path: "Tests/MisuseChecks"
        ),
        .testTarget(
            name: "SwiftQueuesTests",
            dependencies: ["SwiftQueues"],
            path: "Tests/SwiftQueuesTests"
        ),
    ],
    swiftLanguageModes: [.v6]
)
