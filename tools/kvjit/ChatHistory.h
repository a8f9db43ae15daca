#ifndef KVJIT_TOOLS_KVJIT_CHATHISTORY_H_
#define KVJIT_TOOLS_KVJIT_CHATHISTORY_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "tools/serve/ChatMessage.h"

// The conversation `kvjit chat` keeps between turns, and what a line typed at
// its prompt asks for.
namespace kvjit::cli {

// What one input line of `kvjit chat` is.
enum class ChatLine {
  kMessage,  // a user's turn
  kEmpty,    // nothing to send
  kReset,    // "/reset": forget the conversation
  kExit,     // "/exit": end the session
};

// `line` is without its line ending; a command may have blanks around it
// (" /exit " ends the session too).
ChatLine ClassifyChatLine(absl::string_view line);

// The system message and the finished exchanges. The whole conversation is
// rendered through the chat template every turn (a template may render an
// earlier turn differently once a later one follows), and the prefix cache,
// not this history, saves recomputing what earlier turns rendered.
class ChatHistory {
 public:
  // `system`: the system message's content; empty for none (the template's
  // default system turn, where it has one, applies then).
  explicit ChatHistory(std::string system) : system_(std::move(system)) {}

  // The messages of a turn in which the user says `user`: the system
  // message, the exchanges so far, then `user`.
  std::vector<serve::ChatMessage> MessagesFor(absl::string_view user) const;

  // Records a finished exchange: what the user said and what the assistant
  // replied (as much as was shown, when the reply was interrupted).
  void AddExchange(std::string user, std::string assistant);

  // Forgets the exchanges; the system message stays.
  void Clear() { exchanges_.clear(); }

  size_t num_exchanges() const { return exchanges_.size() / 2; }

 private:
  std::string system_;
  // User and assistant messages, alternating.
  std::vector<serve::ChatMessage> exchanges_;
};

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_CHATHISTORY_H_
