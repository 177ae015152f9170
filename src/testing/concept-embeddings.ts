/**
 * A toy embedding that carries meaning for a known test set: a synonym table (rows of words that
 * mean the same, e.g. `["compress", "squash"]`, `["fast", "swiftly"]`) maps each word to its
 * concepts, and the concepts — or the word itself when the table does not know it — are hashed
 * into the dimensions of the vector. "squash swiftly" and "compress fast" then get the same
 * vector although they share no word, which is what an embedding model does and BM25 cannot.
 *
 * It knows only what its table says: it shows that the vector path of hybrid retrieval works end
 * to end (and what fusion recovers when vectors carry meaning), not how well any real embedding
 * model ranks. Served over HTTP by ScriptedOpenAIServer (`embed` option) as `/v1/embeddings`.
 */

// Function words carry no meaning here; every text has them, so they would only blur similarities.
const STOPWORDS = new Set(
  (
    "a an and are as at be by did do does for from has have how in is it its of on or that the " +
    "this to was were what when where which who with"
  ).split(" "),
);

/** Feature hashing (FNV-1a): a bucket and a sign per key, so unrelated keys rarely cancel out. */
function hashKey(key: string, dims: number): { index: number; sign: number } {
  let h = 2166136261;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 16777619);
  }
  return { index: (h >>> 0) % dims, sign: (h & 0x100) === 0 ? 1 : -1 };
}

/**
 * Returns the embedding function of a synonym table: lower-cased words (letters and digits;
 * function words left out), each counted once per concept row it belongs to (`concept:<row>`),
 * or as itself when no row has it; L2-normalised.
 */
export function conceptEmbedding(
  concepts: readonly (readonly string[])[],
  dims = 256,
): (text: string) => number[] {
  const rowsOf = new Map<string, number[]>();
  concepts.forEach((row, i) => {
    for (const word of row) {
      const key = word.toLowerCase();
      rowsOf.set(key, [...(rowsOf.get(key) ?? []), i]);
    }
  });
  return (text: string) => {
    const v: number[] = new Array<number>(dims).fill(0);
    for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
      if (STOPWORDS.has(word)) continue;
      const keys = rowsOf.get(word)?.map((i) => `concept:${i}`) ?? [`word:${word}`];
      for (const key of keys) {
        const { index, sign } = hashKey(key, dims);
        v[index] += sign;
      }
    }
    // Only function words: one fixed direction rather than a zero vector (cosine of zero is undefined).
    if (!v.some((x) => x !== 0)) v[0] = 1;
    const norm = Math.sqrt(v.reduce((a, b) => a + b * b, 0));
    return v.map((x) => x / norm);
  };
}
