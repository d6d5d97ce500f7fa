import type { PlantStore } from './plant-store';

/** A store method, as the wrappers see it. */
export type StoreMethod = (...args: unknown[]) => Promise<unknown>;

/**
 * The same store with every method replaced by `decorate(name, method)`. The decoration is made
 * once per method, so whatever it needs per method (labels, handlers) is not rebuilt per call.
 */
export function wrapStoreMethods(
  store: PlantStore,
  decorate: (name: string, method: StoreMethod) => StoreMethod,
): PlantStore {
  const wrapped: Record<string, StoreMethod> = {};
  for (const [name, method] of Object.entries(store) as [string, StoreMethod][]) {
    wrapped[name] = decorate(name, method);
  }
  return wrapped as unknown as PlantStore;
}
