#ifndef KVJIT_TOOLS_SERVE_OPENFILELIMIT_H_
#define KVJIT_TOOLS_SERVE_OPENFILELIMIT_H_

#include <string>

namespace kvjit::serve {

struct ConnectionRoom {
  int connections;   // what the open-file limit leaves room for, at most those asked
  std::string note;  // what was changed or cut, for the log; empty when neither
};

// Makes room for `connections` sockets under the process's open-file limit
// (RLIMIT_NOFILE), raising its soft limit toward the hard one as nginx's
// worker_rlimit_nofile does: many systems start processes at a soft 1024,
// fewer than a server of thousands of connections needs. Where even the
// hard limit is too low, the connections are cut to fit: past the limit
// accept() fails and the server could take no connection at all.
ConnectionRoom MakeRoomForConnections(int connections);

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_OPENFILELIMIT_H_
