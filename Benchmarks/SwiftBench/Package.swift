// swift-tools-version:6.0
//
// SwiftQueues' Swift API against the toolchain's Dispatch, side by side in
// one run. A separate package so the main one stays dependency-free.
//
//     swift run -c release --package-path Benchmarks/SwiftBench \
//         --scratch-path .build-swiftbench SwiftBench
import PackageDescription

let package = Package(
    name: "SwiftBench",
    dependencies: [
        .package(name: "SwiftQueues", path: "../.."),
    ],
    targets: [
        .executableTarget(
            name: "SwiftBench",
            dependencies: [.product(name: "SwiftQueues", package: "SwiftQueues")],
            path: "Sources/SwiftBench"
        ),
    ],
    swiftLanguageModes: [.v6]
)
