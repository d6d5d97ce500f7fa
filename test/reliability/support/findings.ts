/**
 * Problems a fuzz run found, grouped by kind, each with how often it happened and the smallest
 * example seen. A property records into it instead of stopping at the first problem, so one run
 * reports every distinct bug (and still counts all its requests); the test then asserts it empty.
 */
export class Findings {
  private readonly kinds = new Map<string, { count: number; example: string }>();

  record(kind: string, example: string): void {
    const seen = this.kinds.get(kind);
    if (seen === undefined) this.kinds.set(kind, { count: 1, example });
    else {
      seen.count++;
      if (example.length < seen.example.length) seen.example = example;
    }
  }

  get size(): number {
    return this.kinds.size;
  }

  /** One entry per kind: "kind (N times)" and its smallest example; [] when nothing was found. */
  report(): string[] {
    return [...this.kinds.entries()].map(
      ([kind, { count, example }]) => `${kind} (${count} times); smallest example:\n${example}`,
    );
  }
}
