#include "trainer/ddp/status_from_exception.h"

#include <c10/util/Exception.h>

#include <new>
#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"
#include "trainer/ddp/dist_errors.h"

namespace ddp {
namespace {

std::string FirstLine(const char* text) {
  std::string s(text);
  return s.substr(0, s.find('\n'));
}

absl::Status Make(absl::StatusCode code, absl::string_view context, const std::string& what) {
  return absl::Status(code, context.empty() ? what : absl::StrCat(context, ": ", what));
}

}  // namespace

absl::Status StatusFromException(std::exception_ptr error, absl::string_view context) {
  using Code = absl::StatusCode;
  if (!error) return absl::OkStatus();
  try {
    std::rethrow_exception(error);
  } catch (const StoreTimeoutError& e) {
    return Make(Code::kDeadlineExceeded, context, FirstLine(e.what_without_backtrace()));
  } catch (const CollectiveTimeoutError& e) {
    return Make(Code::kDeadlineExceeded, context, FirstLine(e.what_without_backtrace()));
  } catch (const c10::DistQueueEmptyError& e) {
    return Make(Code::kDeadlineExceeded, context, FirstLine(e.what_without_backtrace()));
  } catch (const c10::DistError& e) {  // network, backend and store errors
    return Make(Code::kUnavailable, context, FirstLine(e.what_without_backtrace()));
  } catch (const c10::OutOfMemoryError& e) {
    return Make(Code::kResourceExhausted, context, FirstLine(e.what_without_backtrace()));
  } catch (const c10::NotImplementedError& e) {
    return Make(Code::kUnimplemented, context, FirstLine(e.what_without_backtrace()));
  } catch (const c10::IndexError& e) {
    return Make(Code::kInvalidArgument, context, FirstLine(e.what_without_backtrace()));
  } catch (const c10::ValueError& e) {
    return Make(Code::kInvalidArgument, context, FirstLine(e.what_without_backtrace()));
  } catch (const c10::TypeError& e) {
    return Make(Code::kInvalidArgument, context, FirstLine(e.what_without_backtrace()));
  } catch (const c10::Error& e) {
    return Make(Code::kInternal, context, FirstLine(e.what_without_backtrace()));
  } catch (const std::bad_alloc& e) {
    return Make(Code::kResourceExhausted, context, FirstLine(e.what()));
  } catch (const std::invalid_argument& e) {
    return Make(Code::kInvalidArgument, context, FirstLine(e.what()));
  } catch (const std::exception& e) {
    return Make(Code::kInternal, context, FirstLine(e.what()));
  } catch (...) {
    return Make(Code::kUnknown, context, "unknown exception");
  }
}

}  // namespace ddp
