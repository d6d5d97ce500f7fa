/** The value of a series (its name, with its labels if it has any) in Prometheus text, or NaN when it is absent. */
export function seriesValue(metricsText: string, series: string): number {
  const line = metricsText.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? Number.NaN : Number(line.slice(series.length + 1));
}
