/** A mistake in the command line: exit code 2 and the usage text, as opposed to a failure (1). */
export class UsageError extends Error {
  /** The usage line to print with the message; set to the command's own when one was named. */
  usage?: string;
}

/** Runs `parse` (a parseArgs call); an unknown or malformed option is a usage error, not a failure. */
export function asUsageError<R>(parse: () => R): R {
  try {
    return parse();
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
}
