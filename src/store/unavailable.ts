import { StoreUnavailableError, type PlantStore } from './plant-store';

/** The same store, with every failure that `isUnavailable` recognises rethrown as a StoreUnavailableError. */
export function reportingUnavailable(
  store: PlantStore,
  isUnavailable: (error: unknown) => boolean,
): PlantStore {
  const wrapped: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(store) as [
    string,
    (...args: unknown[]) => Promise<unknown>,
  ][]) {
    wrapped[name] = async (...args: unknown[]) => {
      try {
        return await method(...args);
      } catch (error) {
        throw isUnavailable(error) ? new StoreUnavailableError({ cause: error }) : error;
      }
    };
  }
  return wrapped as unknown as PlantStore;
}
