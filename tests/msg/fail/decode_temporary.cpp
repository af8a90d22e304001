// Must not compile: the decoded message would view a vector destroyed at the end of the statement.
#include <pushwire/msg/msg.hpp>
#include <vector>
int main() {
  auto m = pushwire::msg::decode<pushwire::msg::send_data>(std::vector<std::byte>(21));
  return m.has_value();
}
