// swift-tools-version:6.0
//
// Swift concurrency on its default executor and on SwiftQueues
// (WorkQueue.installAsGlobalExecutor()), alternated in one run. The program
// re-executes itself once per executor and round, since an executor is
// installed once per process.
//
//     swift run -c release --package-path Benchmarks/ExecutorBench \
//         --scratch-path .build-bench-executor ExecutorBench
import PackageDescription

let package = Package(
    name: "ExecutorBench",
    dependencies: [
        .package(name: "SwiftQueues", path: "../.."),
    ],
    targets: [
        .executableTarget(
            name: "ExecutorBench",
            dependencies: [.product(name: "SwiftQueues", package: "SwiftQueues")],
            path: "Sources/ExecutorBench"
        ),
    ],
    swiftLanguageModes: [.v6]
)
