/**
 * Crafted bad bytes for the tests of corrupt stored data (this package's and codehop's): a deflate
 * bomb written bit by bit (no gigabyte is ever allocated to make it), and invalid deflate data.
 */

/**
 * Raw deflate data that inflates to `bytes` zero bytes (rounded up to 258): one fixed-Huffman
 * block of a literal 0 then copies of 258 bytes at distance 1, 13 bits each (ratio ~159).
 */
export function deflateBomb(bytes: number): Buffer {
  const copies = Math.ceil(Math.max(0, bytes - 1) / 258);
  const out = Buffer.alloc(Math.ceil((3 + 8 + 13 * copies + 7) / 8) + 1);
  let at = 0;
  let bit = 0;
  // Header fields are written least significant bit first, Huffman codes most significant first.
  const field = (value: number, n: number) => {
    for (let i = 0; i < n; i++) put((value >> i) & 1);
  };
  const code = (value: number, n: number) => {
    for (let i = n - 1; i >= 0; i--) put((value >> i) & 1);
  };
  function put(b: number) {
    if (b) out[at] |= 1 << bit;
    if (++bit === 8) {
      bit = 0;
      at++;
    }
  }
  field(1, 1); // BFINAL
  field(1, 2); // BTYPE 01: fixed Huffman codes
  code(0x30, 8); // literal 0
  for (let i = 0; i < copies; i++) {
    code(0b11000101, 8); // length code 285: 258 bytes
    code(0, 5); // distance code 0: distance 1
  }
  code(0, 7); // end of block
  return out.subarray(0, at + (bit ? 1 : 0));
}

/** Bytes that are not raw deflate data (block type 11 is reserved). */
export const NOT_DEFLATE = Buffer.from([0xff, 0xff, 0xff, 0xff, 0x00, 0x01, 0x02, 0x03]);
