// Byte serialisation of negotiation messages. Fixed-width little-endian integers, strings and
// vectors prefixed by their length. Parsing checks every length against the buffer.
#ifndef TUTTI_SRC_WIRE_FORMAT_H_
#define TUTTI_SRC_WIRE_FORMAT_H_

#include <string>

#include "requests/request.h"
#include "base/status.h"

namespace tutti {

std::string SerializeRequestList(const RequestList& list);
Status ParseRequestList(const std::string& bytes, RequestList* list);

std::string SerializeResponseList(const ResponseList& list);
Status ParseResponseList(const std::string& bytes, ResponseList* list);

}  // namespace tutti

#endif  // TUTTI_SRC_WIRE_FORMAT_H_
