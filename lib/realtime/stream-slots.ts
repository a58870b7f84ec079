import { TooManyRequestsError } from '../errors.js';

/**
 * Streams held per client address on one instance, against `realtime.maxClientsPerAddress`: one
 * guest cannot take every slot of `maxClients` (docs/limits.md).
 */
export class StreamSlots {
  private readonly held = new Map<string, number>();

  constructor(private readonly maxPerAddress: number) {}

  /**
   * Takes a slot for `address`, or throws 429 `realtime_too_many_clients_per_address`. The
   * returned function gives the slot back; calling it again does nothing, so every way a stream
   * can end may call it.
   */
  take(address: string): () => void {
    const count = this.held.get(address) ?? 0;
    if (count >= this.maxPerAddress) {
      throw new TooManyRequestsError(
        `This address already has ${this.maxPerAddress} realtime streams open on this server (realtime.maxClientsPerAddress); close one first.`,
        'realtime_too_many_clients_per_address',
      );
    }
    this.held.set(address, count + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.held.get(address) ?? 1) - 1;
      if (left > 0) this.held.set(address, left);
      else this.held.delete(address);
    };
  }
}
