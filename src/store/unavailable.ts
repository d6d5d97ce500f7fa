import { StoreUnavailableError, type PlantStore } from './plant-store';
import { wrapStoreMethods } from './wrap-store';

/** The same store, with every failure that `isUnavailable` recognises rethrown as a StoreUnavailableError. */
export function reportingUnavailable(
  store: PlantStore,
  isUnavailable: (error: unknown) => boolean,
): PlantStore {
  const report = (error: unknown): never => {
    throw isUnavailable(error) ? new StoreUnavailableError({ cause: error }) : error;
  };
  return wrapStoreMethods(
    store,
    (_name, method) =>
      (...args) =>
        method(...args).catch(report),
  );
}
