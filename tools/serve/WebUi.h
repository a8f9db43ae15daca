#ifndef KVJIT_TOOLS_SERVE_WEBUI_H_
#define KVJIT_TOOLS_SERVE_WEBUI_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace httplib {
class Server;
}  // namespace httplib

// kvjit serve's chat page: the files of tools/serve/webui, built into the
// binary (see EmbedWebUi.cmake) and served at / with caching, gzip and a
// Content-Security-Policy that admits the page's own origin alone.
namespace kvjit::serve {

struct WebUiAsset {
  absl::string_view path;  // "/index.html"
  absl::string_view content_type;
  absl::string_view digest;  // hex, of the plain bytes
  absl::string_view plain;
  absl::string_view gzip;
};

// Every file of the page; generated at build time.
const std::vector<WebUiAsset>& WebUiAssets();

// The page's policy: scripts, styles, images and requests from the page's
// own origin only; no inline script, no frames, no form posts.
inline constexpr absl::string_view kWebUiContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// Whether an Accept-Encoding header lets the response be gzip-coded
// (RFC 9110 12.5.3: q=0 refuses a coding; "*" stands for any coding the
// header does not name).
bool AcceptsGzip(absl::string_view accept_encoding);

// Whether an If-None-Match header matches `etag` (RFC 9110 13.1.2: "*" or
// any listed tag, compared weakly).
bool IfNoneMatchMatches(absl::string_view if_none_match, absl::string_view etag);

// The ETag of one coding of an asset.
std::string WebUiETag(const WebUiAsset& asset, bool gzip);

// Adds a GET route for each asset, and / for /index.html.
void RouteWebUi(httplib::Server& server);

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_WEBUI_H_
