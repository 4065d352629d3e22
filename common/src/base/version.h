// Version of the core library (the tutti-core distribution).
#ifndef TUTTI_SRC_VERSION_H_
#define TUTTI_SRC_VERSION_H_

#define TUTTI_CORE_VERSION "0.1.0"

#endif  // TUTTI_SRC_VERSION_H_
