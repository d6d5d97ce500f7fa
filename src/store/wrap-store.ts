import type { PlantStore } from './plant-store';

/** A store method, as the wrappers see it. */
export type StoreMethod = (...args: unknown[]) => Promise<unknown>;

/**
 * The same store with every method replaced by `decorate(name, method)`, and its other members
 * (the token change watch) as they are. The decoration is made once per method, so whatever it
 * needs per method (labels, handlers) is not rebuilt per call.
 */
export function wrapStoreMethods(
  store: PlantStore,
  decorate: (name: string, method: StoreMethod) => StoreMethod,
): PlantStore {
  const wrapped: Record<string, unknown> = {};
  for (const [name, member] of Object.entries(store) as [string, unknown][]) {
    wrapped[name] = typeof member === 'function' ? decorate(name, member as StoreMethod) : member;
  }
  return wrapped as unknown as PlantStore;
}
