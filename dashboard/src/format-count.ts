/** A count with its noun, singular for one: "1 record", "0 records", "3 records". */
export function formatCount(count: number, noun: string): string {
  return `${count} ${count === 1 ? noun : `${noun}s`}`;
}
