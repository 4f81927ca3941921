// The Timeline page's step box: type a step number, Enter goes to it.
//
// A plain QSpinBox fails the user silently: it drops the keystroke that makes a text out of
// range or not a number ("99" on a 10-step run stays "9", "1 2" becomes "12" or stays "1"),
// reports every keystroke as a new value (typing 12 visits step 1 first), and on Enter or
// focus-out puts back the old value without a word. This box takes any text while it is typed,
// sets its value only on Enter or focus-out, and when the text is not one step of the run it
// keeps the step it showed and says why (stepRejected: "no step 99: this run has steps 0–9").
#pragma once

#include <QSpinBox>

namespace lockstep::ui {

class StepBox : public QSpinBox {
    Q_OBJECT
public:
    explicit StepBox(QWidget* parent = nullptr);
    // Why `text` (as typed, with or without the "step " prefix) is not a step of the box's range;
    // empty when it is one.
    QString problem(const QString& text) const;
    // "this run has steps 0–9" (or "this run has only step 0"), for messages about steps.
    QString rangeText() const;

signals:
    // Enter on a step of the range (also when it is the step already shown: Enter means go).
    void stepEntered(int step);
    // Enter or focus-out on a text that is not a step of the range: why, for the user.
    void stepRejected(const QString& why);

protected:
    QValidator::State validate(QString& text, int& pos) const override;
    void keyPressEvent(QKeyEvent* event) override;
    void focusOutEvent(QFocusEvent* event) override;

private:
    bool rejectTypedText(); // says why and shows the current step again; false if the text is fine
};

} // namespace lockstep::ui
