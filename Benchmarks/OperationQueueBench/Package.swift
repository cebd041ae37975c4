// swift-tools-version:6.0
//
// SwiftQueues' ProcedureQueue against Foundation's OperationQueue, side by
// side in one run. A separate package so the main one stays dependency-free
// and Foundation-free.
//
//     swift run -c release --package-path Benchmarks/OperationQueueBench \
//         --scratch-path .build-opsbench
import PackageDescription

let package = Package(
    name: "OperationQueueBench",
    dependencies: [
        .package(name: "SwiftQueues", path: "../.."),
    ],
    targets: [
        .executableTarget(
            name: "OperationQueueBench",
            dependencies: [.product(name: "SwiftQueues", package: "SwiftQueues")],
            path: "Sources/OperationQueueBench"
        ),
    ],
    swiftLanguageModes: [.v6]
)
