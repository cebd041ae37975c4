import SwiftQueues
print("demo")
