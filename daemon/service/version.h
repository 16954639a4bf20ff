#ifndef WASTE_DAEMON_SERVICE_VERSION_H_
#define WASTE_DAEMON_SERVICE_VERSION_H_

namespace waste {

inline constexpr char kWasteVersion[] = "0.1.0";

}  // namespace waste

#endif  // WASTE_DAEMON_SERVICE_VERSION_H_
