import type { CorpusDb } from "./corpus-db.ts";
import { caseVariantKey, exactTitle, foldedKey, titleKey } from "./text.ts";

/** A stored document, as found by title. */
export interface StoredDocument {
  id: number;
  title: string;
  hash: string;
}

/**
 * Titles → documents and redirects in a corpus. A page is stored under its folded title key
 * ({@link titleKey}); a page whose title differs only in case from one already stored gets a
 * {@link caseVariantKey} instead, so neither overwrites the other. Lookups prefer the page with
 * exactly the title asked for and fall back to any page whose title folds to the same key.
 */
export class TitleIndex {
  private readonly byKey;
  private readonly aliasByKey;

  constructor(db: CorpusDb) {
    this.byKey = db.prepare("SELECT id, title, hash FROM documents WHERE title_key = ?");
    this.aliasByKey = db.prepare("SELECT alias, target_key FROM aliases WHERE alias_key = ?");
  }

  /** The document for `title`: the one with exactly this title if stored, else one differing only in case. */
  find(title: string): StoredDocument | undefined {
    const key = titleKey(title);
    if (!key) return undefined;
    return (this.byKey.get(caseVariantKey(title)) ?? this.byKey.get(key)) as
      StoredDocument | undefined;
  }

  /**
   * Where a page titled `title` lives or would be stored: the document it replaces (if any) and
   * its key. A stored page whose title differs only in case is the same page (a rename), unless
   * `distinct(page)` says it must be kept — then the new page gets a key of its own.
   */
  place(
    title: string,
    distinct: (page: StoredDocument) => boolean = () => true,
  ): { doc?: StoredDocument; key: string } {
    const variant = caseVariantKey(title);
    const asVariant = this.byKey.get(variant) as StoredDocument | undefined;
    if (asVariant) return { doc: asVariant, key: variant };
    const key = titleKey(title);
    const folded = this.byKey.get(key) as StoredDocument | undefined;
    if (!folded) return { key };
    return exactTitle(folded.title) === exactTitle(title) || !distinct(folded)
      ? { doc: folded, key }
      : { key: variant };
  }

  /** The stored redirect for `title` (exact title first, then one differing only in case). */
  alias(title: string): { key: string; alias: string; targetKey: string } | undefined {
    for (const key of [caseVariantKey(title), titleKey(title)]) {
      const row = this.aliasByKey.get(key) as { alias: string; target_key: string } | undefined;
      if (row) return { key, alias: row.alias, targetKey: row.target_key };
    }
    return undefined;
  }

  /** The document a redirect's target key names (exact title first, then folded). */
  target(targetKey: string): StoredDocument | undefined {
    return (this.byKey.get(targetKey) ?? this.byKey.get(foldedKey(targetKey))) as
      StoredDocument | undefined;
  }

  /**
   * The document `title` leads to, most exact first: the page with exactly this title, a redirect
   * with exactly this title, then a page or redirect whose title differs only in case.
   */
  resolve(title: string): StoredDocument | undefined {
    const key = titleKey(title);
    if (!key) return undefined;
    const exact = exactTitle(title);
    const variant = caseVariantKey(title);
    const page = this.byKey.get(variant) as StoredDocument | undefined;
    if (page) return page;
    const folded = this.byKey.get(key) as StoredDocument | undefined;
    if (folded && exactTitle(folded.title) === exact) return folded;
    const redirect = this.aliasByKey.get(variant) as { target_key: string } | undefined;
    if (redirect) return this.target(redirect.target_key);
    const foldedRedirect = this.aliasByKey.get(key) as
      { alias: string; target_key: string } | undefined;
    if (foldedRedirect && exactTitle(foldedRedirect.alias) === exact)
      return this.target(foldedRedirect.target_key);
    return folded ?? (foldedRedirect && this.target(foldedRedirect.target_key));
  }
}
