// The step box (see step_box.h).
#include "step_box.h"

#include <QKeyEvent>
#include <QLineEdit>
#include <QRegularExpression>

namespace lockstep::ui {

StepBox::StepBox(QWidget* parent) : QSpinBox(parent)
{
    setKeyboardTracking(false); // a value on Enter or focus-out, not one per keystroke
    setPrefix(tr("step "));
}

QString StepBox::rangeText() const
{
    return minimum() == maximum() ? tr("this run has only step %1").arg(minimum())
                                  : tr("this run has steps %1–%2").arg(minimum()).arg(maximum());
}

QString StepBox::problem(const QString& text) const
{
    QString t = text.trimmed();
    if (t.startsWith(prefix().trimmed(), Qt::CaseInsensitive))
        t = t.mid(prefix().trimmed().size()).trimmed();
    if (t.isEmpty())
        return tr("type a step number: %1").arg(rangeText());
    static const QRegularExpression digits(QStringLiteral("^[0-9]{1,9}$"));
    if (!digits.match(t).hasMatch())
        return tr("“%1” is not a step number: %2").arg(t, rangeText());
    const int step = t.toInt();
    if (step < minimum() || step > maximum())
        return tr("no step %1: %2").arg(step).arg(rangeText());
    return {};
}

QValidator::State StepBox::validate(QString& text, int& pos) const
{
    // Whatever is typed stays in the box (a dropped keystroke is a silent error); Enter judges it.
    // (On a copy: QSpinBox's validation may rewrite the text it refuses.)
    QString copy = text;
    int p = pos;
    return QSpinBox::validate(copy, p) == QValidator::Acceptable ? QValidator::Acceptable : QValidator::Intermediate;
}

bool StepBox::rejectTypedText()
{
    const QString why = problem(lineEdit()->text());
    if (why.isEmpty())
        return false;
    // Back to the step shown, selected so that the next digits replace it.
    lineEdit()->setText(textFromValue(value()).prepend(prefix()));
    selectAll();
    emit stepRejected(why);
    return true;
}

void StepBox::keyPressEvent(QKeyEvent* event)
{
    if (event->key() == Qt::Key_Return || event->key() == Qt::Key_Enter) {
        if (!rejectTypedText()) {
            QSpinBox::keyPressEvent(event); // sets the value (valueChanged) and selects the text
            emit stepEntered(value());
        }
        event->accept();
        return;
    }
    QSpinBox::keyPressEvent(event);
}

void StepBox::focusOutEvent(QFocusEvent* event)
{
    // The user went elsewhere in the window; not when the window itself lost focus or closes.
    if (event->reason() != Qt::ActiveWindowFocusReason && event->reason() != Qt::PopupFocusReason)
        rejectTypedText();
    QSpinBox::focusOutEvent(event);
}

} // namespace lockstep::ui
