#include "tools/serve/WebUi.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "httplib.h"

namespace kvjit::serve {
namespace {

// One element of a comma-separated header, `token;q=0.5` split in two;
// a weight that cannot be read counts as 1, as a missing one does.
struct Weighted {
  absl::string_view token;
  double weight = 1;
};

Weighted ParseWeighted(absl::string_view element) {
  std::vector<absl::string_view> parts = absl::StrSplit(element, ';');
  Weighted weighted{absl::StripAsciiWhitespace(parts[0])};
  for (size_t i = 1; i < parts.size(); ++i) {
    absl::string_view parameter = absl::StripAsciiWhitespace(parts[i]);
    if (!absl::ConsumePrefix(&parameter, "q=") && !absl::ConsumePrefix(&parameter, "Q=")) continue;
    double weight = 1;
    if (absl::SimpleAtod(parameter, &weight)) weighted.weight = weight;
  }
  return weighted;
}

void Answer(const WebUiAsset& asset, const httplib::Request& request,
            httplib::Response& response) {
  const bool gzip = AcceptsGzip(request.get_header_value("Accept-Encoding"));
  const std::string etag = WebUiETag(asset, gzip);
  response.set_header("ETag", etag);
  // The browser asks again each time and gets 304 while the build is the same.
  response.set_header("Cache-Control", "no-cache");
  response.set_header("Vary", "Accept-Encoding");
  response.set_header("Content-Security-Policy", std::string(kWebUiContentSecurityPolicy));
  response.set_header("X-Content-Type-Options", "nosniff");
  response.set_header("Referrer-Policy", "no-referrer");
  response.set_header("Accept-Ranges", "none");
  if (IfNoneMatchMatches(request.get_header_value("If-None-Match"), etag)) {
    response.status = 304;
    return;
  }
  if (gzip) response.set_header("Content-Encoding", "gzip");
  const absl::string_view body = gzip ? asset.gzip : asset.plain;
  // A content provider of known length: cpp-httplib compresses a plain
  // body itself, and the gzip coding here is already made.
  response.set_content_provider(
      body.size(), std::string(asset.content_type),
      [body](size_t offset, size_t length, httplib::DataSink& sink) {
        if (offset >= body.size()) return false;
        return sink.write(body.data() + offset, std::min(length, body.size() - offset));
      });
}

}  // namespace

bool AcceptsGzip(absl::string_view accept_encoding) {
  bool gzip_named = false;
  bool gzip_accepted = false;
  bool any_accepted = false;
  for (absl::string_view element : absl::StrSplit(accept_encoding, ',', absl::SkipWhitespace())) {
    const Weighted weighted = ParseWeighted(element);
    if (absl::EqualsIgnoreCase(weighted.token, "gzip") ||
        absl::EqualsIgnoreCase(weighted.token, "x-gzip")) {
      gzip_named = true;
      gzip_accepted = gzip_accepted || weighted.weight > 0;
    } else if (weighted.token == "*") {
      any_accepted = weighted.weight > 0;
    }
  }
  return gzip_named ? gzip_accepted : any_accepted;
}

bool IfNoneMatchMatches(absl::string_view if_none_match, absl::string_view etag) {
  absl::ConsumePrefix(&etag, "W/");
  for (absl::string_view element : absl::StrSplit(if_none_match, ',', absl::SkipWhitespace())) {
    absl::string_view tag = absl::StripAsciiWhitespace(element);
    if (tag == "*") return true;
    absl::ConsumePrefix(&tag, "W/");
    if (tag == etag) return true;
  }
  return false;
}

std::string WebUiETag(const WebUiAsset& asset, bool gzip) {
  return absl::StrCat("\"", asset.digest, gzip ? "-gzip" : "", "\"");
}

void RouteWebUi(httplib::Server& server) {
  for (const WebUiAsset& asset : WebUiAssets()) {
    const auto handler = [&asset](const httplib::Request& request, httplib::Response& response) {
      Answer(asset, request, response);
    };
    // cpp-httplib's paths are regular expressions.
    server.Get(absl::StrReplaceAll(asset.path, {{".", "\\."}}), handler);
    if (asset.path == "/index.html") server.Get("/", handler);
  }
}

}  // namespace kvjit::serve
