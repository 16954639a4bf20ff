// Tells systemd about the daemon's state (Type=notify units): READY=1 once
// serving, STOPPING=1 on shutdown. A no-op when NOTIFY_SOCKET is unset, so
// the same binary runs under Type=simple or by hand.
#ifndef WASTE_DAEMON_SERVICE_SD_NOTIFY_H_
#define WASTE_DAEMON_SERVICE_SD_NOTIFY_H_

#include <string>

namespace waste {

// Sends `state` (e.g. "READY=1\nSTATUS=serving") to $NOTIFY_SOCKET.
// Returns false if there is no socket or the send failed.
bool NotifySystemd(const std::string& state);

}  // namespace waste

#endif  // WASTE_DAEMON_SERVICE_SD_NOTIFY_H_
