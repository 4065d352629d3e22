#include "negotiation/wire_format.h"

#include <cstring>

namespace tutti {
namespace {

// Version byte at the start of each message, so a mixed-build job fails clearly.
const uint8_t kWireVersion = 4;

class Writer {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) U8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) U8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void F64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    U64(bits);
  }
  void Str(const std::string& s) {
    U32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  bool U8(uint8_t* v) {
    if (pos_ + 1 > in_.size()) return false;
    *v = static_cast<uint8_t>(in_[pos_++]);
    return true;
  }
  bool U32(uint32_t* v) {
    uint64_t wide;
    if (!Unsigned(4, &wide)) return false;
    *v = static_cast<uint32_t>(wide);
    return true;
  }
  bool U64(uint64_t* v) { return Unsigned(8, v); }
  bool F64(double* v) {
    uint64_t bits;
    if (!U64(&bits)) return false;
    std::memcpy(v, &bits, sizeof(bits));
    return true;
  }
  bool Str(std::string* s) {
    uint32_t n;
    if (!U32(&n) || n > in_.size() - pos_) return false;
    s->assign(in_, pos_, n);
    pos_ += n;
    return true;
  }
  // A count of items that each need at least `min_bytes`; rejects counts the buffer can't hold.
  bool Count(size_t min_bytes, uint32_t* n) {
    return U32(n) && static_cast<uint64_t>(*n) * min_bytes <= in_.size() - pos_;
  }
  bool AtEnd() const { return pos_ == in_.size(); }

 private:
  bool Unsigned(int bytes, uint64_t* v) {
    if (pos_ + bytes > in_.size()) return false;
    uint64_t result = 0;
    for (int i = 0; i < bytes; ++i) {
      result |= static_cast<uint64_t>(static_cast<uint8_t>(in_[pos_ + i])) << (8 * i);
    }
    pos_ += bytes;
    *v = result;
    return true;
  }

  const std::string& in_;
  size_t pos_ = 0;
};

void WriteInts(Writer* w, const std::vector<int64_t>& values) {
  w->U32(static_cast<uint32_t>(values.size()));
  for (int64_t v : values) w->U64(static_cast<uint64_t>(v));
}

bool ReadInts(Reader* r, std::vector<int64_t>* values) {
  uint32_t n;
  if (!r->Count(8, &n)) return false;
  values->resize(n);
  for (int64_t& v : *values) {
    uint64_t u;
    if (!r->U64(&u)) return false;
    v = static_cast<int64_t>(u);
  }
  return true;
}

Status Corrupt(const char* what) {
  return Status::Internal(std::string("malformed negotiation message (") + what +
                          "); are all ranks running the same tutti build?");
}

}  // namespace

std::string SerializeRequestList(const RequestList& list) {
  Writer w;
  w.U8(kWireVersion);
  w.U8(list.shutdown ? 1 : 0);
  w.U32(static_cast<uint32_t>(list.requests.size()));
  for (const RequestMeta& r : list.requests) {
    w.Str(r.name);
    w.U8(static_cast<uint8_t>(r.collective));
    w.U8(static_cast<uint8_t>(r.reduce_op));
    w.U8(static_cast<uint8_t>(r.dtype));
    w.U32(static_cast<uint32_t>(r.process_set));
    w.U32(static_cast<uint32_t>(r.shapes.size()));
    for (const std::vector<int64_t>& shape : r.shapes) WriteInts(&w, shape);
    w.F64(r.prescale);
    w.F64(r.postscale);
    w.U32(static_cast<uint32_t>(r.root_rank));
    WriteInts(&w, r.splits);
    w.U8(static_cast<uint8_t>(r.device));
  }
  return w.Take();
}

Status ParseRequestList(const std::string& bytes, RequestList* list) {
  Reader r(bytes);
  uint8_t version, shutdown;
  uint32_t count;
  if (!r.U8(&version) || version != kWireVersion) return Corrupt("request version");
  if (!r.U8(&shutdown) || !r.Count(4, &count)) return Corrupt("request header");
  RequestList result;
  result.shutdown = shutdown != 0;
  result.requests.resize(count);
  for (RequestMeta& m : result.requests) {
    uint8_t collective, op, dtype;
    uint32_t process_set, num_shapes, root;
    if (!r.Str(&m.name) || !r.U8(&collective) || !r.U8(&op) || !r.U8(&dtype) ||
        !r.U32(&process_set) || !r.Count(4, &num_shapes)) {
      return Corrupt("request");
    }
    m.collective = static_cast<Collective>(collective);
    m.reduce_op = static_cast<tutti_reduce_op>(op);
    m.dtype = static_cast<tutti_dtype>(dtype);
    m.process_set = static_cast<int32_t>(process_set);
    m.shapes.resize(num_shapes);
    for (std::vector<int64_t>& shape : m.shapes) {
      if (!ReadInts(&r, &shape)) return Corrupt("shape");
    }
    if (!r.F64(&m.prescale) || !r.F64(&m.postscale)) return Corrupt("scale factors");
    if (!r.U32(&root) || !ReadInts(&r, &m.splits)) return Corrupt("root or splits");
    m.root_rank = static_cast<int32_t>(root);
    uint8_t device;
    if (!r.U8(&device)) return Corrupt("device");
    m.device = static_cast<tutti_device_type>(device);
  }
  if (!r.AtEnd()) return Corrupt("trailing bytes");
  *list = std::move(result);
  return Status::OK();
}

std::string SerializeResponseList(const ResponseList& list) {
  Writer w;
  w.U8(kWireVersion);
  w.U32(static_cast<uint32_t>(list.shutdown_ranks.size()));
  for (int32_t rank : list.shutdown_ranks) w.U32(static_cast<uint32_t>(rank));
  w.U32(static_cast<uint32_t>(list.responses.size()));
  for (const Response& resp : list.responses) {
    w.U8(static_cast<uint8_t>(resp.kind));
    w.U8(static_cast<uint8_t>(resp.collective));
    w.U32(static_cast<uint32_t>(resp.names.size()));
    for (const std::string& n : resp.names) w.Str(n);
    w.Str(resp.error);
    w.U32(static_cast<uint32_t>(resp.process_set));
    w.U8(static_cast<uint8_t>(resp.dtype));
    w.U8(static_cast<uint8_t>(resp.reduce_op));
    WriteInts(&w, resp.counts);
    w.U32(static_cast<uint32_t>(resp.joined_ranks.size()));
    for (int32_t rank : resp.joined_ranks) w.U32(static_cast<uint32_t>(rank));
    WriteInts(&w, resp.sizes);
    w.U32(static_cast<uint32_t>(resp.join_result));
  }
  w.U32(static_cast<uint32_t>(list.warnings.size()));
  for (const std::string& warning : list.warnings) w.Str(warning);
  w.U32(static_cast<uint32_t>(list.tuning.size()));
  for (double value : list.tuning) w.F64(value);
  return w.Take();
}

Status ParseResponseList(const std::string& bytes, ResponseList* list) {
  Reader r(bytes);
  uint8_t version;
  uint32_t count;
  if (!r.U8(&version) || version != kWireVersion) return Corrupt("response version");
  ResponseList result;
  if (!r.Count(4, &count)) return Corrupt("response header");
  result.shutdown_ranks.resize(count);
  for (int32_t& rank : result.shutdown_ranks) {
    uint32_t v;
    if (!r.U32(&v)) return Corrupt("shutdown ranks");
    rank = static_cast<int32_t>(v);
  }
  if (!r.Count(4, &count)) return Corrupt("response header");
  result.responses.resize(count);
  for (Response& resp : result.responses) {
    uint8_t kind, collective;
    uint32_t names;
    if (!r.U8(&kind) || !r.U8(&collective) || !r.Count(4, &names)) return Corrupt("response");
    resp.kind = static_cast<Response::Kind>(kind);
    resp.collective = static_cast<Collective>(collective);
    resp.names.resize(names);
    for (std::string& n : resp.names) {
      if (!r.Str(&n)) return Corrupt("response name");
    }
    if (!r.Str(&resp.error)) return Corrupt("response error");
    uint32_t process_set, joined, join_result;
    uint8_t dtype, op;
    if (!r.U32(&process_set) || !r.U8(&dtype) || !r.U8(&op) || !ReadInts(&r, &resp.counts) ||
        !r.Count(4, &joined)) {
      return Corrupt("response details");
    }
    resp.process_set = static_cast<int32_t>(process_set);
    resp.dtype = static_cast<tutti_dtype>(dtype);
    resp.reduce_op = static_cast<tutti_reduce_op>(op);
    resp.joined_ranks.resize(joined);
    for (int32_t& rank : resp.joined_ranks) {
      uint32_t v;
      if (!r.U32(&v)) return Corrupt("joined ranks");
      rank = static_cast<int32_t>(v);
    }
    if (!ReadInts(&r, &resp.sizes) || !r.U32(&join_result)) return Corrupt("response sizes");
    resp.join_result = static_cast<int32_t>(join_result);
  }
  if (!r.Count(4, &count)) return Corrupt("warnings");
  result.warnings.resize(count);
  for (std::string& warning : result.warnings) {
    if (!r.Str(&warning)) return Corrupt("warning");
  }
  if (!r.Count(8, &count)) return Corrupt("tuning");
  result.tuning.resize(count);
  for (double& value : result.tuning) {
    if (!r.F64(&value)) return Corrupt("tuning");
  }
  if (!r.AtEnd()) return Corrupt("trailing bytes");
  *list = std::move(result);
  return Status::OK();
}

}  // namespace tutti
