// What a signal that ends the process says once the command's files are all written (sim/base/interrupt.h):
// a SIGTERM from a scheduler after a run's set is in place, while it prints its summary, still ends the
// process with status 128 + signal, and says after its "interrupted" line that the files are complete, so
// that the status is not taken for a lost or half-written folder. Apart from interrupt.h, which most files
// include, as only the commands that write sets call it.
#pragma once

#include <string>

namespace trnsim::interrupt {

// From now on, a signal that ends the process writes "\ntrnsim: <note>\n" to stderr after its own message
// (cut to 4 KiB; as that message, only when the console shows errors). Called again, replaces the note.
void set_done_note(const std::string& note);

}  // namespace trnsim::interrupt
