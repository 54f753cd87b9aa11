"""An experiment's configuration: the settings (`settings`), what a file may hold (`schema`),
reading and merging layers (`experiment`), flags and presets to a resolved configuration
(`launch`), plugin options (`options`), the generated reference (`reference`) and the
parts a trial builds from (`blueprints`)."""
