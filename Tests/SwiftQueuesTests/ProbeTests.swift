import Testing
@testable import SwiftQueues
@Test func probe() { #expect(_probe() == 1) }
