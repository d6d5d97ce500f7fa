import type { PlantStore } from './plant-store';

type StoreMethod = (...args: unknown[]) => Promise<unknown>;

/** The same store with every method run through `around`, which receives the method's name and a call of it. */
export function wrapStoreMethods(
  store: PlantStore,
  around: (name: string, call: () => Promise<unknown>) => Promise<unknown>,
): PlantStore {
  const wrapped: Record<string, StoreMethod> = {};
  for (const [name, method] of Object.entries(store) as [string, StoreMethod][]) {
    wrapped[name] = (...args) => around(name, () => method(...args));
  }
  return wrapped as unknown as PlantStore;
}
