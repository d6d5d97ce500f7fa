import { StoreUnavailableError, type PlantStore } from './plant-store';
import { wrapStoreMethods } from './wrap-store';

/** The same store, with every failure that `isUnavailable` recognises rethrown as a StoreUnavailableError. */
export function reportingUnavailable(
  store: PlantStore,
  isUnavailable: (error: unknown) => boolean,
): PlantStore {
  return wrapStoreMethods(store, async (_name, call) => {
    try {
      return await call();
    } catch (error) {
      throw isUnavailable(error) ? new StoreUnavailableError({ cause: error }) : error;
    }
  });
}
