#!/usr/bin/env node
'use strict';
// s3rver's own command line (same options, e.g. `--directory DIR --port 0`) with one fix.
//
// s3rver 3.7.1 (and its main branch) misreads a suffix range, `Range: bytes=-N` ("the last N
// bytes"): it serves bytes 0..N instead. Real S3 and moto serve the tail, and the store reads
// a pack's footer that way (s3fs `cat_file(start=-N)`), so packs larger than N would read as
// damaged. The fix turns a suffix range into the equivalent `bytes=START-` before s3rver
// parses it. `make setup` installs s3rver in .venv/node; the tests run this file with NODE_PATH
// pointing there.

const objectController = require('s3rver/lib/controllers/object');

const getObject = objectController.getObject;
objectController.getObject = async function getObjectWithSuffixRanges(ctx) {
  const suffix = /^bytes=-(\d+)$/.exec(ctx.headers.range || '');
  if (suffix) {
    const metadata = await ctx.store
      .getMetadata(ctx.params.bucket, ctx.params.key)
      .catch(() => null);
    if (metadata) {
      const size = Number(metadata['content-length']);
      ctx.headers.range = `bytes=${Math.max(0, size - Number(suffix[1]))}-`;
    }
  }
  return getObject(ctx);
};

require('s3rver/bin/s3rver.js');
