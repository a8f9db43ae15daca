#include "tools/serve/WebUi.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace kvjit::serve {
namespace {

TEST(AcceptsGzip, TakesGzipNamedWithAWeightAboveZero) {
  EXPECT_TRUE(AcceptsGzip("gzip"));
  EXPECT_TRUE(AcceptsGzip("gzip, deflate, br, zstd"));
  EXPECT_TRUE(AcceptsGzip("br;q=1.0, GZIP;q=0.5"));
  EXPECT_TRUE(AcceptsGzip("x-gzip"));
  EXPECT_TRUE(AcceptsGzip("gzip;q=0.001"));
  EXPECT_TRUE(AcceptsGzip(" gzip ; q=1 "));
}

TEST(AcceptsGzip, RefusesGzipAtWeightZeroOrUnnamed) {
  EXPECT_FALSE(AcceptsGzip(""));
  EXPECT_FALSE(AcceptsGzip("identity"));
  EXPECT_FALSE(AcceptsGzip("br, deflate"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0.000"));
  EXPECT_FALSE(AcceptsGzip("gzipped"));
}

TEST(AcceptsGzip, TheWildcardStandsOnlyForCodingsNotNamed) {
  EXPECT_TRUE(AcceptsGzip("*"));
  EXPECT_TRUE(AcceptsGzip("br, *;q=0.1"));
  EXPECT_FALSE(AcceptsGzip("*;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0, *"));
  EXPECT_TRUE(AcceptsGzip("gzip, *;q=0"));
}

TEST(IfNoneMatchMatches, ComparesTagsWeakly) {
  EXPECT_TRUE(IfNoneMatchMatches("\"abc\"", "\"abc\""));
  EXPECT_TRUE(IfNoneMatchMatches("W/\"abc\"", "\"abc\""));
  EXPECT_TRUE(IfNoneMatchMatches("\"x\", \"abc\"", "\"abc\""));
  EXPECT_TRUE(IfNoneMatchMatches("*", "\"abc\""));
  EXPECT_FALSE(IfNoneMatchMatches("", "\"abc\""));
  EXPECT_FALSE(IfNoneMatchMatches("\"abcd\"", "\"abc\""));
  EXPECT_FALSE(IfNoneMatchMatches("abc", "\"abc\""));
}

TEST(WebUiAssets, HoldTheFilesTheirContentTypesAndGzipCodings) {
  std::set<std::string> paths;
  for (const WebUiAsset& asset : WebUiAssets()) {
    paths.insert(std::string(asset.path));
    EXPECT_FALSE(asset.plain.empty()) << asset.path;
    // A gzip member: magic bytes, deflate, no time (a reproducible build).
    ASSERT_GE(asset.gzip.size(), 18u) << asset.path;
    EXPECT_EQ(asset.gzip.substr(0, 3), absl::string_view("\x1f\x8b\x08", 3)) << asset.path;
    EXPECT_EQ(asset.gzip.substr(4, 4), absl::string_view("\0\0\0\0", 4)) << asset.path;
    EXPECT_EQ(asset.digest.size(), 32u) << asset.path;
    EXPECT_NE(WebUiETag(asset, true), WebUiETag(asset, false)) << asset.path;
  }
  EXPECT_EQ(paths, (std::set<std::string>{"/index.html", "/chat.css", "/chat.js",
                                          "/favicon.svg"}));
}

}  // namespace
}  // namespace kvjit::serve
