import type {
  KnowledgeSource,
  PageLookup,
  PageSummary,
  Passage,
  SourceKind,
} from "../../store/types.ts";

/**
 * Several knowledge sources as one (`--source web,corpus`): a search asks each and interleaves
 * their results (first result of each source in the order given, then the second ...); a page is
 * read from the source whose search showed it, and says which (`Page.kind`), so citations name
 * their own source. A title two sources share is shown as "Title (web)" / "Title (corpus)".
 */
export class MultiSource implements KnowledgeSource {
  readonly kind = "mixed" as const;
  /** Shown title → the source and the title it knows the page by. */
  private readonly shown = new Map<string, { member: KnowledgeSource; title: string }>();

  constructor(readonly members: readonly KnowledgeSource[]) {}

  async search(query: string, options: { limit?: number } = {}): Promise<PageSummary[]> {
    const limit = options.limit ?? 5;
    const lists = await Promise.all(
      this.members.map(async (m) => {
        try {
          return await m.search(query, { limit });
        } catch (err) {
          // One source down: the others still answer; with none left the error stands.
          if (this.members.length === 1) throw err;
          return err as Error;
        }
      }),
    );
    if (lists.every((l) => l instanceof Error)) throw lists[0];
    const out: PageSummary[] = [];
    for (
      let i = 0;
      out.length < limit && lists.some((l) => !(l instanceof Error) && i < l.length);
      i++
    ) {
      lists.forEach((list, j) => {
        if (list instanceof Error || i >= list.length || out.length >= limit) return;
        const hit = list[i];
        const member = this.members[j];
        out.push({ ...hit, title: this.show(hit.title, member) });
      });
    }
    return out;
  }

  async getPage(title: string): Promise<PageLookup> {
    const { member, title: own } = this.find(title);
    return withKind(await member.getPage(own), member);
  }

  async retrievePassages(
    title: string,
    query: string,
    options: { k?: number } = {},
  ): Promise<{ lookup: PageLookup; passages: Passage[] }> {
    const { member, title: own } = this.find(title);
    const { lookup, passages } = await member.retrievePassages(own, query, options);
    return { lookup: withKind(lookup, member), passages };
  }

  async close(): Promise<void> {
    await Promise.all(this.members.map((m) => m.close()));
  }

  /** The title a member's page is shown under: its own, unless another source's page has it. */
  private show(title: string, member: KnowledgeSource): string {
    const taken = this.shown.get(title);
    if (!taken || taken.member === member) {
      this.shown.set(title, { member, title });
      return title;
    }
    const tagged = `${title} (${member.kind})`;
    this.shown.set(tagged, { member, title });
    return tagged;
  }

  /** The source of a shown title; an unknown title: the first source (a corpus page, a URL ...). */
  private find(title: string): { member: KnowledgeSource; title: string } {
    const known = this.shown.get(title.trim());
    if (known) return known;
    const web = this.members.find((m) => m.kind === "web");
    if (web && /^https?:\/\//i.test(title.trim())) return { member: web, title };
    return { member: this.members.find((m) => m.kind !== "web") ?? this.members[0], title };
  }
}

function withKind(lookup: PageLookup, member: KnowledgeSource): PageLookup {
  if (lookup.status !== "found" || member.kind === "mixed") return lookup;
  return { ...lookup, page: { ...lookup.page, kind: member.kind as SourceKind } };
}
