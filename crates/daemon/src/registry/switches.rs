//! Switches: made on demand or by `switch-add`, removed by `switch-del` or
//! with their last on-demand port.

use std::collections::BTreeMap;
use std::sync::Arc;

use ringswitch_control::name;
use ringswitch_switch::{LearningBridge, Switch};
use tracing::info;

use super::{make_persistent, no_switch, Registry, RegistryError, SwitchEntry, MAX_SWITCHES};

impl Registry {
    pub(super) fn ensure_switch(
        &mut self,
        sw: &str,
        persistent: bool,
    ) -> Result<&mut SwitchEntry, RegistryError> {
        if !self.switches.contains_key(sw) {
            if self.switches.len() >= MAX_SWITCHES {
                return Err(RegistryError::TooManySwitches {
                    switch: sw.to_string(),
                    max: MAX_SWITCHES,
                });
            }
            let fwd = Box::new(LearningBridge::new(self.cfg.mac_age_s));
            self.switches.insert(
                sw.to_string(),
                SwitchEntry {
                    switch: Arc::new(Switch::new(sw, fwd, self.cfg.batch)),
                    ports: BTreeMap::new(),
                    persistent,
                    direct: false,
                    openflow: None,
                },
            );
            info!(switch = sw, "switch created");
        }
        Ok(self.switches.get_mut(sw).expect("just inserted"))
    }

    /// `switch-add`.
    pub fn switch_add(&mut self, sw: &str) -> Result<(), RegistryError> {
        name::check_switch_name(sw)?;
        if let Some(s) = self.switches.get_mut(sw) {
            return make_persistent(&mut s.persistent, || RegistryError::SwitchExists {
                switch: sw.to_string(),
            });
        }
        self.ensure_switch(sw, true).map(|_| ())
    }

    /// `switch-del`.
    pub fn switch_del(&mut self, sw: &str) -> Result<(), RegistryError> {
        let s = self.switches.get(sw).ok_or_else(|| no_switch(sw))?;
        if !s.ports.is_empty() {
            return Err(RegistryError::SwitchHasPorts {
                switch: sw.to_string(),
                ports: s.ports.len(),
            });
        }
        self.switches.remove(sw);
        info!(switch = sw, "switch deleted");
        Ok(())
    }

    /// Does not leave an on-demand switch behind for a port that failed.
    pub(super) fn drop_failed_switch(&mut self, sw: &str, failed: bool) {
        if failed
            && self
                .switches
                .get(sw)
                .is_some_and(|s| s.ports.is_empty() && !s.persistent)
        {
            self.switches.remove(sw);
        }
    }
}
